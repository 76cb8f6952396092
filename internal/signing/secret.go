package signing

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/payhook/payhook"
)

// Secret is one configured secret: the key bytes used to verify and the
// fingerprint reported in payhook.Envelope.SecretID.
type Secret struct {
	// ID is the fingerprint of the secret as configured (see Fingerprint).
	ID string
	// Key is the verification key: the secret's bytes for HMAC, or a
	// decoded key for schemes that encode it (Standard Webhooks).
	Key []byte
}

// Fingerprint returns "sha256:" followed by the first 12 hex digits of the
// SHA-256 of secret. It identifies a secret in logs and stored events
// without revealing it.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}

// NewSecret returns the Secret with the given key, fingerprinted from raw,
// the secret as configured.
func NewSecret(raw string, key []byte) Secret {
	return Secret{ID: Fingerprint(raw), Key: key}
}

// ParseSecrets returns one Secret per configured secret, keyed by the
// secret's own bytes. Several secrets are allowed at once so a secret can
// be rotated without downtime. It returns an error wrapping
// payhook.ErrConfig when raw is empty or holds an empty secret.
func ParseSecrets(raw []string) ([]Secret, error) {
	if err := CheckSecrets(raw); err != nil {
		return nil, err
	}
	out := make([]Secret, len(raw))
	for i, s := range raw {
		out[i] = NewSecret(s, []byte(s))
	}
	return out, nil
}

// CheckSecrets returns an error wrapping payhook.ErrConfig when raw is
// empty or holds an empty secret.
func CheckSecrets(raw []string) error {
	if len(raw) == 0 {
		return fmt.Errorf("no secret configured: %w", payhook.ErrConfig)
	}
	for i, s := range raw {
		if s == "" {
			return fmt.Errorf("secret %d is empty: %w", i+1, payhook.ErrConfig)
		}
	}
	return nil
}
