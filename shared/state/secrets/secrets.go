// Package secrets encrypts the secrets in agent configs (API keys) before they are stored, with
// envelope encryption: each Seal draws a fresh 256-bit data key, encrypts the secret with it under
// AES-256-GCM, and stores the data key only in wrapped (encrypted) form beside the ciphertext.
//
// The key that wraps data keys is a KeySource. In AWS it is a KMS key: the master key never
// leaves KMS, and sealing or opening a secret costs one KMS call (GenerateDataKey or Decrypt)
// whatever the secret's size, so the secret itself is never sent to KMS. In development it is a
// local 32-byte key (SECRETS_LOCAL_KEY).
//
// Every sealed secret is bound to associated data chosen by the caller, "accountId/agentId", both
// in the AES-GCM tag and, with KMS, in the data key's encryption context: a sealed blob copied to
// another agent's record cannot be opened there.
//
// A sealed secret is a versioned binary envelope:
//
//	version (1 byte) | source kind (1 byte) | wrapped key length (2 bytes, big endian) |
//	wrapped key | nonce (12 bytes) | ciphertext and GCM tag
//
// Everything before the nonce is authenticated by the GCM tag together with the caller's data.
// The source kind keeps a blob sealed under KMS from ever being handed to a local key, and the
// reverse, so that mistake reads as a configuration error rather than as a corrupt secret.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrCannotOpen reports a sealed secret whose authentication failed: the key is not the one it
// was sealed with, the associated data is another record's, or the bytes were altered.
var ErrCannotOpen = errors.New("sealed secret cannot be opened: wrong key or it belongs to another record")

// Kind identifies a KeySource in the envelope.
type Kind byte

// The key source kinds. Their values are written into envelopes and must never change.
const (
	KindKMS   Kind = 1
	KindLocal Kind = 2
)

func (k Kind) String() string {
	switch k {
	case KindKMS:
		return "AWS KMS"
	case KindLocal:
		return "a local key"
	}
	return fmt.Sprintf("unknown key source %d", byte(k))
}

// KeySource makes and unwraps data keys. aad is the associated data of the secret the data key
// is for; a source that can bind it to the wrapped key (as KMS does with its encryption context)
// must, so that DecryptDataKey with other aad fails.
type KeySource interface {
	// Kind is recorded in each envelope so an envelope is only opened by the same kind of source.
	Kind() Kind
	// GenerateDataKey returns a new 32-byte data key and the same key wrapped.
	GenerateDataKey(ctx context.Context, aad []byte) (plaintext, wrapped []byte, err error)
	// DecryptDataKey unwraps a data key, failing with ErrCannotOpen when it is not its own.
	DecryptDataKey(ctx context.Context, wrapped, aad []byte) ([]byte, error)
}

// Box seals and opens secrets with data keys from a KeySource. It is safe for concurrent use if
// its KeySource is; both sources in this package are.
type Box struct {
	src KeySource
}

// New returns a Box over src.
func New(src KeySource) *Box {
	return &Box{src: src}
}

const (
	version1   byte = 1
	headerLen       = 4 // version, kind, wrapped key length
	nonceLen        = 12
	tagLen          = 16
	dataKeyLen      = 32
)

// Seal encrypts plaintext under a fresh data key, bound to aad, and returns the envelope.
func (b *Box) Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error) {
	dataKey, wrapped, err := b.src.GenerateDataKey(ctx, aad)
	if err != nil {
		return nil, fmt.Errorf("generating data key: %w", err)
	}
	defer clear(dataKey)
	if len(dataKey) != dataKeyLen {
		return nil, fmt.Errorf("key source returned a %d-byte data key, want %d", len(dataKey), dataKeyLen)
	}
	if len(wrapped) > 0xFFFF {
		return nil, fmt.Errorf("key source returned a %d-byte wrapped key, at most %d fit the envelope", len(wrapped), 0xFFFF)
	}
	aead, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}
	env := make([]byte, headerLen, headerLen+len(wrapped)+nonceLen+len(plaintext)+tagLen)
	env[0] = version1
	env[1] = byte(b.src.Kind())
	binary.BigEndian.PutUint16(env[2:headerLen], uint16(len(wrapped)))
	env = append(env, wrapped...)
	// The header and wrapped key are authenticated with the caller's aad, so no byte of the
	// envelope can change unnoticed. aead draws the random nonce and writes it first.
	return aead.Seal(env, nil, plaintext, additionalData(env, aad)), nil
}

// Open decrypts an envelope made by Seal with the same aad and the same key.
func (b *Box) Open(ctx context.Context, sealed, aad []byte) ([]byte, error) {
	if len(sealed) == 0 {
		return nil, errors.New("sealed secret is truncated: it is empty")
	}
	if sealed[0] != version1 {
		return nil, fmt.Errorf("sealed secret has unknown envelope version %d", sealed[0])
	}
	if len(sealed) < headerLen {
		return nil, fmt.Errorf("sealed secret is truncated: %d bytes, shorter than its header", len(sealed))
	}
	if kind, want := Kind(sealed[1]), b.src.Kind(); kind != want {
		return nil, fmt.Errorf("sealed secret was sealed with %v but this box uses %v", kind, want)
	}
	wrappedEnd := headerLen + int(binary.BigEndian.Uint16(sealed[2:headerLen]))
	if len(sealed) < wrappedEnd+nonceLen+tagLen {
		return nil, fmt.Errorf("sealed secret is truncated: %d bytes, at least %d expected", len(sealed), wrappedEnd+nonceLen+tagLen)
	}
	dataKey, err := b.src.DecryptDataKey(ctx, sealed[headerLen:wrappedEnd], aad)
	if err != nil {
		return nil, fmt.Errorf("decrypting data key: %w", err)
	}
	defer clear(dataKey)
	if len(dataKey) != dataKeyLen {
		return nil, fmt.Errorf("key source returned a %d-byte data key, want %d", len(dataKey), dataKeyLen)
	}
	aead, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}
	plaintext, err := aead.Open(nil, nil, sealed[wrappedEnd:], additionalData(sealed[:wrappedEnd], aad))
	if err != nil {
		return nil, ErrCannotOpen
	}
	return plaintext, nil
}

func additionalData(header, aad []byte) []byte {
	return append(header[:len(header):len(header)], aad...)
}

// newGCM returns AES-256-GCM under key, drawing a random 12-byte nonce for each Seal and
// prefixing it to the ciphertext.
func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("creating cipher: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("creating cipher: %w", err)
	}
	return aead, nil
}
