package secrets_test

import (
	"errors"
	"testing"

	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/google/go-cmp/cmp"
)

func TestKMSRequests(t *testing.T) {
	tests := []struct {
		name    string
		aad     []byte
		wantCtx map[string]string
	}{
		{"record aad", []byte("acc_1/agt_1"), map[string]string{"harness:aad": "acc_1/agt_1"}},
		{"binary aad", []byte{0xff, 0x00, 0x01}, map[string]string{"harness:aad-base64": "/wAB"}},
		{"no aad", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := newFakeKMS(testKeyID)
			box := secrets.New(secrets.NewKMS(fake, testKeyID))
			sealed, err := box.Seal(t.Context(), []byte("sk-proj-abc123"), tt.aad)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := box.Open(t.Context(), sealed, tt.aad); err != nil {
				t.Fatal(err)
			}
			want := []kmsCall{
				{Op: "Encrypt", KeyID: testKeyID, EncryptionContext: tt.wantCtx},
				{Op: "Decrypt", KeyID: testKeyID, EncryptionContext: tt.wantCtx},
			}
			if diff := cmp.Diff(want, fake.recorded()); diff != "" {
				t.Errorf("KMS requests mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKMSFailures(t *testing.T) {
	throttled := &types.KMSInternalException{Message: new("slow down")}
	sealing := newFakeKMS(testKeyID)
	sealed, err := secrets.New(secrets.NewKMS(sealing, testKeyID)).Seal(t.Context(), []byte("sk"), aad)
	if err != nil {
		t.Fatal(err)
	}
	failing := newFakeKMS(testKeyID)
	failing.err = throttled
	box := secrets.New(secrets.NewKMS(failing, testKeyID))

	t.Run("seal", func(t *testing.T) {
		_, err := box.Seal(t.Context(), []byte("sk"), aad)
		if !errors.Is(err, throttled) {
			t.Errorf("Seal error = %v, want it to wrap %v", err, throttled)
		}
	})
	t.Run("open", func(t *testing.T) {
		_, err := box.Open(t.Context(), sealed, aad)
		if !errors.Is(err, throttled) || errors.Is(err, secrets.ErrCannotOpen) {
			t.Errorf("Open error = %v, want it to wrap %v and not be %v", err, throttled, secrets.ErrCannotOpen)
		}
	})
	t.Run("open with another context", func(t *testing.T) {
		_, err := secrets.New(secrets.NewKMS(sealing, testKeyID)).Open(t.Context(), sealed, []byte("acc_1/agt_2"))
		var invalid *types.InvalidCiphertextException
		if !errors.Is(err, secrets.ErrCannotOpen) || !errors.As(err, &invalid) {
			t.Errorf("Open error = %v, want %v wrapping KMS's InvalidCiphertextException", err, secrets.ErrCannotOpen)
		}
	})
}
