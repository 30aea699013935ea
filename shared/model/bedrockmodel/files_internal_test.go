package bedrockmodel

import (
	"testing"

	"github.com/agentharness/harness/shared/model/modeltest"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
)

// A user message's files go to Converse as an image block and a document block, each after its
// note; a file it takes in neither form is its note alone.
func TestFilePartsAreSent(t *testing.T) {
	_, blocks, err := convert(modeltest.FileParts())
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, b := range blocks {
		switch v := b.(type) {
		case *types.ContentBlockMemberText:
			kinds = append(kinds, "text:"+v.Value)
		case *types.ContentBlockMemberImage:
			src, _ := v.Value.Source.(*types.ImageSourceMemberBytes)
			kinds = append(kinds, "image:"+string(v.Value.Format)+":"+string(src.Value))
		case *types.ContentBlockMemberDocument:
			src, _ := v.Value.Source.(*types.DocumentSourceMemberBytes)
			kinds = append(kinds, "document:"+string(v.Value.Format)+":"+*v.Value.Name+":"+string(src.Value))
		}
	}
	want := []string{
		"text:what is in these?",
		"text:[attachment att_png: chart.png, image/png]", "image:png:png-bytes",
		"text:[attachment att_pdf: report.pdf, application/pdf]", "document:pdf:report:pdf-bytes",
		"text:[attachment att_zip: data.zip, application/zip]",
	}
	if len(kinds) != len(want) {
		t.Fatalf("blocks %q, want %q", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Errorf("block %d is %q, want %q", i, kinds[i], want[i])
		}
	}
}
