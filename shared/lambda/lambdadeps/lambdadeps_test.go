package lambdadeps_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/lambda/lambdadeps"
)

func TestMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		name      string
		env       map[string]string
		wantLimit int64
		wantOK    bool
	}{
		{"512 MB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, 384 << 20, true},
		{"10 GB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "10240"}, 7680 << 20, true},
		{"the operator's GOMEMLIMIT wins", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMEMLIMIT": "100MiB"}, 0, false},
		{"outside Lambda", map[string]string{}, 0, false},
		{"not a number", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			limit, ok := lambdadeps.MemoryLimit(lambdadeps.ConfigFrom(func(k string) string { return tt.env[k] }).Runtime)
			if limit != tt.wantLimit || ok != tt.wantOK {
				t.Errorf("MemoryLimit = %d, %v; want %d, %v", limit, ok, tt.wantLimit, tt.wantOK)
			}
		})
	}
}

func TestProcs(t *testing.T) {
	for _, tt := range []struct {
		name      string
		env       map[string]string
		wantProcs int
		wantOK    bool
	}{
		{"512 MB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, 1, true},
		{"one vCPU", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1769"}, 1, true},
		{"just under two vCPUs", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "3537"}, 1, true},
		{"10 GB function", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "10240"}, 5, true},
		{"the operator's GOMAXPROCS wins", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMAXPROCS": "4"}, 0, false},
		{"outside Lambda", map[string]string{}, 0, false},
		{"not a number", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			procs, ok := lambdadeps.Procs(lambdadeps.ConfigFrom(func(k string) string { return tt.env[k] }).Runtime)
			if procs != tt.wantProcs || ok != tt.wantOK {
				t.Errorf("Procs = %d, %v; want %d, %v", procs, ok, tt.wantProcs, tt.wantOK)
			}
		})
	}
}

// Secret reads a secret's string from Secrets Manager, here a stand-in on loopback that checks
// the call's shape: GetSecretValue, signed, for the id asked.
func TestSecretReadsSecretsManager(t *testing.T) {
	var asked []string
	d := loadAgainst(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ SecretId string }
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") || json.Unmarshal(body, &in) != nil {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		asked = append(asked, in.SecretId)
		if in.SecretId == "binary" {
			w.Write([]byte(`{"Name":"binary","SecretBinary":"AAE="}`))
			return
		}
		w.Write([]byte(`{"Name":"` + in.SecretId + `","SecretString":"-----BEGIN NATS USER JWT-----"}`))
	}))
	got, err := d.Secret(context.Background(), "arn:aws:secretsmanager:us-east-1:000000000000:secret:nats-creds")
	if err != nil || got != "-----BEGIN NATS USER JWT-----" {
		t.Errorf("Secret = %q, %v; want the secret's string", got, err)
	}
	if _, err := d.Secret(context.Background(), "binary"); err == nil || !strings.Contains(err.Error(), "no string value") {
		t.Errorf("a binary secret: %v, want an error saying it has no string value", err)
	}
	if want := []string{"arn:aws:secretsmanager:us-east-1:000000000000:secret:nats-creds", "binary"}; !slices.Equal(asked, want) {
		t.Errorf("asked for %v, want %v", asked, want)
	}
}

// loadAgainst loads deps whose AWS clients call h, a stand-in on loopback.
func loadAgainst(t *testing.T, h http.Handler) lambdadeps.Deps {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Setenv("AWS_ENDPOINT_URL", srv.URL)
	t.Setenv("AWS_REGION", "us-east-1")
	d, err := lambdadeps.Load(context.Background(), lambdadeps.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
