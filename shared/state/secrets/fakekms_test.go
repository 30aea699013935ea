package secrets_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// fakeKMS stands in for AWS KMS, which cannot run locally here. It is not a mock that replays
// answers: it really wraps data keys with AES-256-GCM under its own master key, authenticating
// the key id and the encryption context, so Decrypt fails as KMS does (IncorrectKeyException,
// InvalidCiphertextException) when the key or the context differs from Encrypt's.
type fakeKMS struct {
	keyID string
	aead  cipher.AEAD
	// err, when set, is returned by every call, as a throttled or unreachable KMS would.
	err error

	mu    sync.Mutex
	calls []kmsCall
}

// kmsCall records what a request asked of KMS.
type kmsCall struct {
	Op                string
	KeyID             string
	EncryptionContext map[string]string
}

func newFakeKMS(keyID string) *fakeKMS {
	master := make([]byte, 32)
	rand.Read(master)
	block, err := aes.NewCipher(master)
	if err != nil {
		panic(err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		panic(err)
	}
	return &fakeKMS{keyID: keyID, aead: aead}
}

func (f *fakeKMS) record(c kmsCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeKMS) recorded() []kmsCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeKMS) Encrypt(_ context.Context, in *kms.EncryptInput, _ ...func(*kms.Options)) (*kms.EncryptOutput, error) {
	f.record(kmsCall{Op: "Encrypt", KeyID: aws.ToString(in.KeyId), EncryptionContext: in.EncryptionContext})
	if f.err != nil {
		return nil, f.err
	}
	if aws.ToString(in.KeyId) != f.keyID {
		return nil, &types.NotFoundException{Message: aws.String("key " + aws.ToString(in.KeyId) + " does not exist")}
	}
	if len(in.Plaintext) != 32 {
		return nil, errors.New("fake kms: the harness encrypts 32-byte data keys only")
	}
	key := in.Plaintext
	// A real blob names its key; this one starts with the key id's length and the key id.
	blob := append([]byte{byte(len(f.keyID))}, f.keyID...)
	blob = f.aead.Seal(blob, nil, key, authenticated(f.keyID, in.EncryptionContext))
	return &kms.EncryptOutput{KeyId: in.KeyId, CiphertextBlob: blob}, nil
}

func (f *fakeKMS) Decrypt(_ context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	f.record(kmsCall{Op: "Decrypt", KeyID: aws.ToString(in.KeyId), EncryptionContext: in.EncryptionContext})
	if f.err != nil {
		return nil, f.err
	}
	blob := in.CiphertextBlob
	if len(blob) == 0 || len(blob) < 1+int(blob[0]) {
		return nil, &types.InvalidCiphertextException{Message: aws.String("malformed ciphertext")}
	}
	blobKeyID := string(blob[1 : 1+blob[0]])
	if in.KeyId == nil || *in.KeyId != blobKeyID || blobKeyID != f.keyID {
		return nil, &types.IncorrectKeyException{Message: aws.String("the key id does not match the ciphertext")}
	}
	key, err := f.aead.Open(nil, nil, blob[1+blob[0]:], authenticated(f.keyID, in.EncryptionContext))
	if err != nil {
		return nil, &types.InvalidCiphertextException{}
	}
	return &kms.DecryptOutput{KeyId: in.KeyId, Plaintext: key}, nil
}

// authenticated is what the fake's GCM authenticates: the key id and the encryption context
// (JSON orders map keys, so equal contexts encode equally).
func authenticated(keyID string, encCtx map[string]string) []byte {
	b, err := json.Marshal(struct {
		KeyID   string
		Context map[string]string
	}{keyID, encCtx})
	if err != nil {
		panic(err)
	}
	return b
}
