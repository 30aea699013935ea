package secrets

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// KMSAPI is the part of *kms.Client that KMS uses.
type KMSAPI interface {
	Encrypt(ctx context.Context, in *kms.EncryptInput, optFns ...func(*kms.Options)) (*kms.EncryptOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, optFns ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

var _ KMSAPI = (*kms.Client)(nil)

// KMS makes data keys with an AWS KMS key, which never leaves KMS. The secret's associated data
// becomes the data key's encryption context, so KMS refuses to unwrap the key for another record,
// and CloudTrail shows which record each Decrypt was for.
type KMS struct {
	client KMSAPI
	keyID  string
}

var _ KeySource = (*KMS)(nil)

// NewKMS returns a key source over the KMS key keyID (a key id, key ARN or alias).
func NewKMS(client KMSAPI, keyID string) *KMS {
	return &KMS{client: client, keyID: keyID}
}

// Kind reports KindKMS.
func (k *KMS) Kind() Kind { return KindKMS }

// GenerateDataKey makes a random AES-256 data key and has KMS encrypt it, bound to aad. This is
// what KMS GenerateDataKey does; calling Encrypt instead lets the function's role use SAM's
// KMSEncryptPolicy, and the key still never leaves KMS.
func (k *KMS) GenerateDataKey(ctx context.Context, aad []byte) (plaintext, wrapped []byte, err error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, nil, err
	}
	out, err := k.client.Encrypt(ctx, &kms.EncryptInput{
		KeyId:             aws.String(k.keyID),
		Plaintext:         key,
		EncryptionContext: encryptionContext(aad),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kms Encrypt with key %s: %w", k.keyID, err)
	}
	return key, out.CiphertextBlob, nil
}

// DecryptDataKey asks KMS to unwrap a data key. It names the key, so KMS never decrypts a blob
// under some other key the caller may use, and fails with ErrCannotOpen when KMS reports the
// blob is not for this key or this aad.
func (k *KMS) DecryptDataKey(ctx context.Context, wrapped, aad []byte) ([]byte, error) {
	out, err := k.client.Decrypt(ctx, &kms.DecryptInput{
		KeyId:             aws.String(k.keyID),
		CiphertextBlob:    wrapped,
		EncryptionContext: encryptionContext(aad),
	})
	var invalid *types.InvalidCiphertextException
	var incorrect *types.IncorrectKeyException
	if errors.As(err, &invalid) || errors.As(err, &incorrect) {
		return nil, fmt.Errorf("%w: %w", ErrCannotOpen, err)
	}
	if err != nil {
		return nil, fmt.Errorf("kms Decrypt with key %s: %w", k.keyID, err)
	}
	return out.Plaintext, nil
}

// encryptionContext is the KMS encryption context that binds a data key to aad: aad itself
// under "harness:aad" when it is UTF-8 (as "accountId/agentId" is, and readable in CloudTrail),
// its base64 under "harness:aad-base64" otherwise, and none when aad is empty.
func encryptionContext(aad []byte) map[string]string {
	switch {
	case len(aad) == 0:
		return nil
	case utf8.Valid(aad):
		return map[string]string{"harness:aad": string(aad)}
	default:
		return map[string]string{"harness:aad-base64": base64.StdEncoding.EncodeToString(aad)}
	}
}
