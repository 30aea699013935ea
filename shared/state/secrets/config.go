package secrets

import (
	"context"
	"errors"
	"fmt"
)

// Config says which key seals secrets: a KMS key's id (SECRETS_KMS_KEY_ID, set by the deployed
// template) or a local key, standard base64 of 32 bytes (SECRETS_LOCAL_KEY, set by make dev).
type Config struct {
	KMSKeyID, LocalKey string
}

// FromConfig returns the Box c configures, with a KMS client from kmsClient, which is only called
// for a KMS key. Setting neither key or both is an error: secrets must not be sealed by whichever
// happens to win.
func FromConfig(_ context.Context, c Config, kmsClient func() KMSAPI) (*Box, error) {
	keyID, localKey := c.KMSKeyID, c.LocalKey
	switch {
	case keyID != "" && localKey != "":
		return nil, errors.New("both SECRETS_KMS_KEY_ID and SECRETS_LOCAL_KEY are set: set only one")
	case keyID != "":
		client := kmsClient()
		if client == nil {
			return nil, errors.New("SECRETS_KMS_KEY_ID is set but there is no KMS client")
		}
		return New(NewKMS(client, keyID)), nil
	case localKey != "":
		key, err := ParseLocalKey(localKey)
		if err != nil {
			return nil, fmt.Errorf("SECRETS_LOCAL_KEY: %w", err)
		}
		src, err := NewLocal(key)
		clear(key)
		if err != nil {
			return nil, fmt.Errorf("SECRETS_LOCAL_KEY: %w", err)
		}
		return New(src), nil
	}
	return nil, errors.New("secrets are not configured: set SECRETS_KMS_KEY_ID to a KMS key (as the deployed template does) or SECRETS_LOCAL_KEY to a base64 32-byte key for development (as make dev does)")
}
