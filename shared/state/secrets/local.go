package secrets

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
)

// Local wraps data keys with a master key held in memory, for development. Each data key is
// wrapped with AES-256-GCM under the master key, bound to the secret's associated data.
type Local struct {
	aead cipher.AEAD
}

var _ KeySource = (*Local)(nil)

// NewLocal returns a key source over a 32-byte master key.
func NewLocal(key []byte) (*Local, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("local key is %d bytes, want 32", len(key))
	}
	aead, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	return &Local{aead: aead}, nil
}

// NewRandomLocal returns a key source over a fresh random master key, for a process (the local
// runner, a test) whose sealed records need not outlive it.
func NewRandomLocal() *Local {
	key := make([]byte, 32)
	rand.Read(key) // never fails since Go 1.24
	l, _ := NewLocal(key)
	return l
}

// ParseLocalKey decodes a master key written as standard base64 of 32 bytes, as printed by
// `openssl rand -base64 32`. Surrounding white space is ignored.
func ParseLocalKey(s string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		// The error names only an offset, never the key's bytes.
		return nil, fmt.Errorf("local key is not standard base64: %w", err)
	}
	if len(key) != 32 {
		return nil, fmt.Errorf("local key decodes to %d bytes, want 32 (make one with `openssl rand -base64 32`)", len(key))
	}
	return key, nil
}

// Kind reports KindLocal.
func (l *Local) Kind() Kind { return KindLocal }

// GenerateDataKey returns a random data key and the key wrapped under the master key.
func (l *Local) GenerateDataKey(_ context.Context, aad []byte) (plaintext, wrapped []byte, err error) {
	plaintext = make([]byte, dataKeyLen)
	rand.Read(plaintext) // never fails since Go 1.24
	return plaintext, l.aead.Seal(nil, nil, plaintext, aad), nil
}

// DecryptDataKey unwraps a data key made by GenerateDataKey with the same master key and aad.
func (l *Local) DecryptDataKey(_ context.Context, wrapped, aad []byte) ([]byte, error) {
	key, err := l.aead.Open(nil, nil, wrapped, aad)
	if err != nil {
		return nil, ErrCannotOpen
	}
	return key, nil
}
