package completion_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentharness/harness/infra/fuzzcheck"
	"github.com/agentharness/harness/shared/edge/completion"
	"github.com/agentharness/harness/shared/tool/asynctools"
	"github.com/agentharness/harness/shared/wire/httpjson"
	"github.com/google/go-cmp/cmp"
)

// FuzzParseCompletion reads the bodies of POST /async-tools/{resultId}/complete.
func FuzzParseCompletion(f *testing.F) {
	for _, s := range []string{
		`{"status":"completed","response":{"ok":true,"rows":[1,2]}}`,
		`{"status":"completed","response":"plain text"}`,
		`{"status":"completed","response":null}`,
		`{"status":"failed","error":"upstream timed out"}`,
		`{"status":"failed","error":"  "}`,
		`{"status":"failed","error":"x","response":{}}`,
		`{"status":"completed"}`,
		`{"status":"done","response":1}`,
		`{"status":1}`,
		`{"status":"completed","response":1,"extra":true}`,
		`{"status":"completed","response":1} {}`,
		`{"status":"completed","status":"failed","error":"x"}`,
		`nope`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := httpjson.CheckKeys(body)
		var out asynctools.Outcome
		if err == nil {
			out, err = completion.Parse(body)
		}
		if err != nil {
			fuzzcheck.Refusal(t, body, err)
			return
		}
		encoded := map[string]any{"status": out.Status}
		switch out.Status {
		case asynctools.Completed:
			if len(bytes.TrimSpace(out.Response)) == 0 || !json.Valid(out.Response) || out.Error != "" {
				t.Fatalf("accepted completed outcome %+v: want a JSON response and no error", out)
			}
			encoded["response"] = out.Response
		case asynctools.Failed:
			if strings.TrimSpace(out.Error) == "" || len(out.Response) != 0 {
				t.Fatalf("accepted failed outcome %+v: want an error and no response", out)
			}
			encoded["error"] = out.Error
		default:
			t.Fatalf("accepted status %q", out.Status)
		}
		again, err := json.Marshal(encoded)
		if err != nil {
			t.Fatalf("encoding %+v: %v", out, err)
		}
		out2, err := completion.Parse(again)
		if err != nil {
			t.Fatalf("the accepted outcome, encoded again as %s, is refused: %v", again, err)
		}
		if diff := cmp.Diff(out, out2, fuzzcheck.JSONEqual); diff != "" {
			t.Fatalf("outcome round trip (-first +again):\n%s", diff)
		}
	})
}
