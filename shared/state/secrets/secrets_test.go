package secrets_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/agentharness/harness/shared/state/secrets"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

const testKeyID = "arn:aws:kms:us-east-1:111122223333:key/test"

var aad = []byte("acc_1/agt_1")

func localSource(t *testing.T) *secrets.Local {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	src, err := secrets.NewLocal(key)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// staticSource always hands out the same data key and ignores aad, so that only the Box's own
// binding of the envelope and the aad can catch a change.
type staticSource struct{ key []byte }

func (s staticSource) Kind() secrets.Kind { return secrets.KindLocal }

func (s staticSource) GenerateDataKey(context.Context, []byte) ([]byte, []byte, error) {
	return bytes.Clone(s.key), []byte("static"), nil
}

func (s staticSource) DecryptDataKey(context.Context, []byte, []byte) ([]byte, error) {
	return bytes.Clone(s.key), nil
}

// sources returns a fresh key source of each kind by name.
func sources(t *testing.T) map[string]secrets.KeySource {
	return map[string]secrets.KeySource{
		"local":  localSource(t),
		"kms":    secrets.NewKMS(newFakeKMS(testKeyID), testKeyID),
		"static": staticSource{key: bytes.Repeat([]byte{7}, 32)},
	}
}

func TestRoundTrip(t *testing.T) {
	large := make([]byte, 64<<10)
	rand.Read(large)
	plaintexts := map[string][]byte{
		"empty":   nil,
		"api key": []byte("sk-proj-abc123"),
		"64 KiB":  large,
	}
	for srcName, src := range sources(t) {
		box := secrets.New(src)
		for name, plaintext := range plaintexts {
			t.Run(srcName+"/"+name, func(t *testing.T) {
				sealed, err := box.Seal(t.Context(), plaintext, aad)
				if err != nil {
					t.Fatalf("Seal: %v", err)
				}
				if len(plaintext) > 0 && bytes.Contains(sealed, plaintext) {
					t.Error("the envelope contains the plaintext")
				}
				got, err := box.Open(t.Context(), sealed, aad)
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				if diff := cmp.Diff(plaintext, got, cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Open(Seal(x)) mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestEnvelopeHeader(t *testing.T) {
	for srcName, src := range sources(t) {
		t.Run(srcName, func(t *testing.T) {
			sealed, err := secrets.New(src).Seal(t.Context(), []byte("x"), aad)
			if err != nil {
				t.Fatal(err)
			}
			type header struct {
				Version byte
				Kind    secrets.Kind
				Rest    int // bytes after the wrapped key: nonce, ciphertext, tag
			}
			wrappedLen := int(binary.BigEndian.Uint16(sealed[2:4]))
			got := header{sealed[0], secrets.Kind(sealed[1]), len(sealed) - 4 - wrappedLen}
			want := header{1, src.Kind(), 12 + 1 + 16}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("envelope header mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSealsDiffer(t *testing.T) {
	for srcName, src := range sources(t) {
		t.Run(srcName, func(t *testing.T) {
			box := secrets.New(src)
			a, err := box.Seal(t.Context(), []byte("sk-same"), aad)
			if err != nil {
				t.Fatal(err)
			}
			b, err := box.Seal(t.Context(), []byte("sk-same"), aad)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(a, b) {
				t.Fatal("two seals of the same plaintext are equal")
			}
			// Even with the same data key (static), the nonce and so the ciphertext differ.
			if bytes.Equal(a[len(a)-16-7:], b[len(b)-16-7:]) {
				t.Error("two seals of the same plaintext have the same ciphertext")
			}
		})
	}
}

// flip returns a copy of b with byte i inverted.
func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0xFF
	return b
}

func wrappedEnd(sealed []byte) int { return 4 + int(binary.BigEndian.Uint16(sealed[2:4])) }

func TestOpenRejects(t *testing.T) {
	tests := []struct {
		name string
		// change returns the envelope and aad to open instead of the sealed ones.
		change  func(sealed []byte) ([]byte, []byte)
		wantIs  error  // when set, errors.Is(err, wantIs)
		wantMsg string // when set, err's message contains it
	}{
		{
			name:   "aad of another agent",
			change: func(s []byte) ([]byte, []byte) { return s, []byte("acc_1/agt_2") },
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name:   "aad of another account",
			change: func(s []byte) ([]byte, []byte) { return s, []byte("acc_2/agt_1") },
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name:   "no aad",
			change: func(s []byte) ([]byte, []byte) { return s, nil },
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name:   "tampered ciphertext",
			change: func(s []byte) ([]byte, []byte) { return flip(s, len(s)-17), aad },
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name:   "tampered tag",
			change: func(s []byte) ([]byte, []byte) { return flip(s, len(s)-1), aad },
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name:   "tampered nonce",
			change: func(s []byte) ([]byte, []byte) { return flip(s, wrappedEnd(s)), aad },
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name:   "tampered wrapped key",
			change: func(s []byte) ([]byte, []byte) { return flip(s, wrappedEnd(s)-1), aad },
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name: "wrapped key length one short",
			change: func(s []byte) ([]byte, []byte) {
				s = bytes.Clone(s)
				binary.BigEndian.PutUint16(s[2:4], binary.BigEndian.Uint16(s[2:4])-1)
				return s, aad
			},
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name: "appended byte",
			change: func(s []byte) ([]byte, []byte) {
				return append(bytes.Clone(s), 0), aad
			},
			wantIs: secrets.ErrCannotOpen,
		},
		{
			name: "unknown version",
			change: func(s []byte) ([]byte, []byte) {
				s = bytes.Clone(s)
				s[0] = 2
				return s, aad
			},
			wantMsg: "unknown envelope version 2",
		},
		{
			name: "unknown source kind",
			change: func(s []byte) ([]byte, []byte) {
				s = bytes.Clone(s)
				s[1] = 9
				return s, aad
			},
			wantMsg: "was sealed with unknown key source 9 but this box uses",
		},
	}
	for srcName, src := range sources(t) {
		box := secrets.New(src)
		sealed, err := box.Seal(t.Context(), []byte("sk-proj-abc123"), aad)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			t.Run(srcName+"/"+tt.name, func(t *testing.T) {
				env, openAAD := tt.change(sealed)
				got, err := box.Open(t.Context(), env, openAAD)
				if err == nil {
					t.Fatalf("Open succeeded with %q, want an error", got)
				}
				if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
					t.Errorf("Open error = %v, want errors.Is %v", err, tt.wantIs)
				}
				if !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("Open error = %q, want it to contain %q", err, tt.wantMsg)
				}
			})
		}
	}
}

func TestOpenWithAnotherKey(t *testing.T) {
	otherKMS := newFakeKMS(testKeyID) // same key id, another master key
	tests := []struct {
		name       string
		seal, open secrets.KeySource
	}{
		{"local keys differ", localSource(t), localSource(t)},
		{"kms master keys differ", secrets.NewKMS(newFakeKMS(testKeyID), testKeyID), secrets.NewKMS(otherKMS, testKeyID)},
		{"kms key ids differ", secrets.NewKMS(newFakeKMS(testKeyID), testKeyID), secrets.NewKMS(newFakeKMS("other"), "other")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sealed, err := secrets.New(tt.seal).Seal(t.Context(), []byte("sk-proj-abc123"), aad)
			if err != nil {
				t.Fatal(err)
			}
			_, err = secrets.New(tt.open).Open(t.Context(), sealed, aad)
			if !errors.Is(err, secrets.ErrCannotOpen) {
				t.Errorf("Open error = %v, want %v", err, secrets.ErrCannotOpen)
			}
		})
	}
}

func TestOpenWithAnotherKind(t *testing.T) {
	tests := []struct {
		name       string
		seal, open secrets.KeySource
		wantMsg    string
	}{
		{
			name:    "kms envelope opened by local key",
			seal:    secrets.NewKMS(newFakeKMS(testKeyID), testKeyID),
			open:    localSource(t),
			wantMsg: "sealed secret was sealed with AWS KMS but this box uses a local key",
		},
		{
			name:    "local envelope opened by kms",
			seal:    localSource(t),
			open:    secrets.NewKMS(newFakeKMS(testKeyID), testKeyID),
			wantMsg: "sealed secret was sealed with a local key but this box uses AWS KMS",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sealed, err := secrets.New(tt.seal).Seal(t.Context(), []byte("sk-proj-abc123"), aad)
			if err != nil {
				t.Fatal(err)
			}
			_, err = secrets.New(tt.open).Open(t.Context(), sealed, aad)
			if err == nil || err.Error() != tt.wantMsg {
				t.Errorf("Open error = %v, want %q", err, tt.wantMsg)
			}
		})
	}
}

func TestOpenTruncated(t *testing.T) {
	for srcName, src := range sources(t) {
		box := secrets.New(src)
		sealed, err := box.Seal(t.Context(), []byte("sk-proj-abc123"), aad)
		if err != nil {
			t.Fatal(err)
		}
		end := wrappedEnd(sealed)
		tests := []struct {
			name    string
			n       int // bytes kept
			wantMsg string
		}{
			{"empty", 0, "sealed secret is truncated: it is empty"},
			{"version only", 1, "shorter than its header"},
			{"header without length", 3, "shorter than its header"},
			{"header only", 4, "at least"},
			{"half the wrapped key", 4 + (end-4)/2, "at least"},
			{"no nonce", end, "at least"},
			{"nonce without tag", end + 12, "at least"},
			{"one byte short of a tag", end + 12 + 15, "at least"},
		}
		for _, tt := range tests {
			t.Run(srcName+"/"+tt.name, func(t *testing.T) {
				_, err := box.Open(t.Context(), sealed[:tt.n], aad)
				if err == nil || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Errorf("Open error = %v, want a truncation error containing %q", err, tt.wantMsg)
				}
			})
		}
		t.Run(srcName+"/every prefix", func(t *testing.T) {
			for n := range len(sealed) {
				if got, err := box.Open(t.Context(), sealed[:n], aad); err == nil {
					t.Errorf("Open of the first %d of %d bytes = %q, want an error", n, len(sealed), got)
				}
			}
		})
	}
}

// keepingSource hands out data keys from a Local source and keeps them, to see what the Box
// leaves in them.
type keepingSource struct {
	*secrets.Local
	keys [][]byte
}

func (s *keepingSource) GenerateDataKey(ctx context.Context, aad []byte) ([]byte, []byte, error) {
	key, wrapped, err := s.Local.GenerateDataKey(ctx, aad)
	s.keys = append(s.keys, key)
	return key, wrapped, err
}

func (s *keepingSource) DecryptDataKey(ctx context.Context, wrapped, aad []byte) ([]byte, error) {
	key, err := s.Local.DecryptDataKey(ctx, wrapped, aad)
	s.keys = append(s.keys, key)
	return key, err
}

func TestDataKeysZeroed(t *testing.T) {
	src := &keepingSource{Local: localSource(t)}
	box := secrets.New(src)
	sealed, err := box.Seal(t.Context(), []byte("sk-proj-abc123"), aad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := box.Open(t.Context(), sealed, aad); err != nil {
		t.Fatal(err)
	}
	want := [][]byte{make([]byte, 32), make([]byte, 32)}
	if diff := cmp.Diff(want, src.keys); diff != "" {
		t.Errorf("data keys after Seal and Open mismatch (-want +got):\n%s", diff)
	}
}
