package secrets_test

import (
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/google/go-cmp/cmp"
)

func TestFromConfig(t *testing.T) {
	const localKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	const shortKey = "AAECAwQFBgcICQoLDA0ODw==" // 16 bytes
	tests := []struct {
		name        string
		env         map[string]string
		nilClient   bool
		wantKind    secrets.Kind // of a sealed envelope, when there is no error
		wantClients int          // calls of kmsClient
		wantErr     string
	}{
		{
			name:        "kms",
			env:         map[string]string{"SECRETS_KMS_KEY_ID": testKeyID},
			wantKind:    secrets.KindKMS,
			wantClients: 1,
		},
		{
			name:     "local",
			env:      map[string]string{"SECRETS_LOCAL_KEY": localKey},
			wantKind: secrets.KindLocal,
		},
		{
			name:     "local with a trailing newline",
			env:      map[string]string{"SECRETS_LOCAL_KEY": localKey + "\n"},
			wantKind: secrets.KindLocal,
		},
		{
			name:    "neither",
			env:     map[string]string{},
			wantErr: "set SECRETS_KMS_KEY_ID to a KMS key (as the deployed template does) or SECRETS_LOCAL_KEY",
		},
		{
			name:    "both",
			env:     map[string]string{"SECRETS_KMS_KEY_ID": testKeyID, "SECRETS_LOCAL_KEY": localKey},
			wantErr: "both SECRETS_KMS_KEY_ID and SECRETS_LOCAL_KEY are set: set only one",
		},
		{
			name:    "local key not base64",
			env:     map[string]string{"SECRETS_LOCAL_KEY": "not-a-key!"},
			wantErr: "SECRETS_LOCAL_KEY: local key is not standard base64",
		},
		{
			name:    "local key too short",
			env:     map[string]string{"SECRETS_LOCAL_KEY": shortKey},
			wantErr: "SECRETS_LOCAL_KEY: local key decodes to 16 bytes, want 32",
		},
		{
			name:        "kms without a client",
			env:         map[string]string{"SECRETS_KMS_KEY_ID": testKeyID},
			nilClient:   true,
			wantClients: 1,
			wantErr:     "SECRETS_KMS_KEY_ID is set but there is no KMS client",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clients := 0
			kmsClient := func() secrets.KMSAPI {
				clients++
				if tt.nilClient {
					return nil
				}
				return newFakeKMS(testKeyID)
			}
			box, err := secrets.FromConfig(t.Context(), secrets.Config{KMSKeyID: tt.env["SECRETS_KMS_KEY_ID"], LocalKey: tt.env["SECRETS_LOCAL_KEY"]}, kmsClient)
			if clients != tt.wantClients {
				t.Errorf("kmsClient called %d times, want %d", clients, tt.wantClients)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromConfig error = %v, want one containing %q", err, tt.wantErr)
				}
				if v := tt.env["SECRETS_LOCAL_KEY"]; v != "" && strings.Contains(err.Error(), strings.TrimSpace(v)) {
					t.Errorf("FromConfig error %q reveals the key", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromConfig: %v", err)
			}
			sealed, err := box.Seal(t.Context(), []byte("sk"), aad)
			if err != nil {
				t.Fatal(err)
			}
			if got := secrets.Kind(sealed[1]); got != tt.wantKind {
				t.Errorf("sealed with %v, want %v", got, tt.wantKind)
			}
			got, err := box.Open(t.Context(), sealed, aad)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff("sk", string(got)); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseLocalKey(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []byte
		wantErr string
	}{
		{"valid", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}, ""},
		{"surrounding space", "  AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n", []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31}, ""},
		{"empty", "", nil, "decodes to 0 bytes, want 32"},
		{"unpadded", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8", nil, "not standard base64"},
		{"url alphabet", "-_-_AwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", nil, "not standard base64"},
		{"too long", "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g", nil, "decodes to 33 bytes, want 32"},
		{"hex", "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", nil, "decodes to 48 bytes, want 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := secrets.ParseLocalKey(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseLocalKey error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseLocalKey mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewLocalKeyLength(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := secrets.NewLocal(make([]byte, n)); err == nil || !strings.Contains(err.Error(), "want 32") {
			t.Errorf("NewLocal with %d bytes: error = %v, want a length error", n, err)
		}
	}
	if _, err := secrets.NewLocal(make([]byte, 32)); err != nil {
		t.Errorf("NewLocal with 32 bytes: %v", err)
	}
}
