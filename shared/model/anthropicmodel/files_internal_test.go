package anthropicmodel

import (
	"encoding/json"
	"testing"

	"github.com/agentharness/harness/shared/model"
	"github.com/agentharness/harness/shared/model/modeltest"
)

// A user message's files go to Anthropic as an image block and a document block, each after its
// note; a file it takes in neither form is its note alone.
func TestFilePartsAreSent(t *testing.T) {
	msgs, err := messages([]model.Message{modeltest.FileParts()})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	modeltest.CheckFileParts(t, b,
		`"text":"[attachment att_png: chart.png, image/png]"`,
		`"source":{"data":"cG5nLWJ5dGVz","media_type":"image/png","type":"base64"},"type":"image"`,
		`"source":{"data":"cGRmLWJ5dGVz","media_type":"application/pdf","type":"base64"},"type":"document"`,
		`"text":"[attachment att_zip: data.zip, application/zip]"`,
	)
}
