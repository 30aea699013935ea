package lambdadeps_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
)

// A deployment key is read from Secrets Manager once, when first asked for, here from a stand-in
// on loopback that checks the call's shape; a secret that cannot be read is named, and read
// again next time.
func TestKeyReadsItsSecretOnce(t *testing.T) {
	const arn = "arn:aws:secretsmanager:us-east-1:000000000000:secret:harness/openai-api-key"
	var calls, fail atomic.Int32
	d := loadAgainst(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ SecretId string }
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") || json.Unmarshal(body, &in) != nil || in.SecretId != arn {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		if fail.Load() > 0 {
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"__type":"AccessDeniedException","message":"not allowed"}`))
			return
		}
		w.Write([]byte(`{"Name":"harness/openai-api-key","SecretString":"sk-from-secret\n"}`))
	}))
	ctx := context.Background()

	fail.Store(1)
	failing := d.Key("OPENAI_API_KEY_SECRET", "sk-plain", arn)
	if _, err := failing.Value(ctx); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY_SECRET") || !strings.Contains(err.Error(), arn) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Errorf("a secret that cannot be read: %v, want an error naming the variable, the secret and what failed", err)
	}
	fail.Store(0)
	for i := range 2 {
		if got, err := failing.Value(ctx); err != nil || got != "sk-from-secret" {
			t.Errorf("Value #%d = %q, %v; want the secret's string, trimmed, not the plain value", i+1, got, err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("Secrets Manager was asked %d times, want 2: once failing, once for good", n)
	}

	if got, err := d.Key("OPENAI_API_KEY_SECRET", "sk-plain", "").Value(ctx); err != nil || got != "sk-plain" {
		t.Errorf("without a secret Value = %q, %v; want the plain value", got, err)
	}
	local := lambdadeps.Deps{}.Key("TAVILY_API_KEY_SECRET", "", arn)
	if _, err := local.Value(ctx); err == nil || !strings.Contains(err.Error(), "TAVILY_API_KEY_SECRET is set but no Secrets Manager client is") {
		t.Errorf("a secret without a client: %v, want an error saying so", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("Secrets Manager was asked %d times, want still 2", n)
	}
}
