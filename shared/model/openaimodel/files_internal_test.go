package openaimodel

import (
	"encoding/json"
	"testing"

	"github.com/agentharness/harness/shared/model/modeltest"
)

// A user message's files go to OpenAI as an image part and a file part, each after its note;
// a file it takes in neither form is its note alone.
func TestFilePartsAreSent(t *testing.T) {
	msgs, err := messages(modeltest.FileParts(), false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	modeltest.CheckFileParts(t, b,
		`{"text":"[attachment att_png: chart.png, image/png]","type":"text"}`,
		`{"image_url":{"url":"data:image/png;base64,cG5nLWJ5dGVz"},"type":"image_url"}`,
		`{"file":{"file_data":"data:application/pdf;base64,cGRmLWJ5dGVz","filename":"report.pdf"},"type":"file"}`,
		`{"text":"[attachment att_zip: data.zip, application/zip]","type":"text"}`,
	)
}
