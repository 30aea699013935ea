package googlemodel

import (
	"encoding/json"
	"testing"

	"github.com/agentharness/harness/shared/model/modeltest"
)

// A user message's files go to Gemini as inline data, each after its note; a file of a type it
// does not take inline is its note alone.
func TestFilePartsAreSent(t *testing.T) {
	c, err := content(modeltest.FileParts(), false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	modeltest.CheckFileParts(t, b,
		`{"text":"[attachment att_png: chart.png, image/png]"}`,
		`{"inlineData":{"data":"cG5nLWJ5dGVz","mimeType":"image/png"}}`,
		`{"inlineData":{"data":"cGRmLWJ5dGVz","mimeType":"application/pdf"}}`,
		`{"text":"[attachment att_zip: data.zip, application/zip]"}`,
	)
}
