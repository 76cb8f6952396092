package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"

	"github.com/payhook/payhook"
)

// HMACSHA256 returns the HMAC-SHA256 of the concatenation of parts under
// key.
func HMACSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// Equal reports whether two decoded signatures are equal, in time that
// does not depend on their contents.
func Equal(a, b []byte) bool {
	return hmac.Equal(a, b)
}

// MatchHMAC computes the HMAC-SHA256 of msg under each secret and returns
// the first secret whose MAC equals one of the decoded candidate
// signatures. ok is false when none matches.
func MatchHMAC(secrets []Secret, msg []byte, candidates [][]byte) (s Secret, ok bool) {
	for _, sec := range secrets {
		mac := HMACSHA256(sec.Key, msg)
		for _, c := range candidates {
			if Equal(mac, c) {
				return sec, true
			}
		}
	}
	return Secret{}, false
}

// DecodeHex decodes a hex signature (either case). It returns an error
// wrapping payhook.ErrSignature when sig is empty or not hex.
func DecodeHex(sig string) ([]byte, error) {
	if sig == "" {
		return nil, fmt.Errorf("empty signature: %w", payhook.ErrSignature)
	}
	b, err := hex.DecodeString(sig)
	if err != nil {
		return nil, fmt.Errorf("signature %q is not hex: %w", Abbrev(sig), payhook.ErrSignature)
	}
	return b, nil
}

// DecodeBase64 decodes a standard base64 signature, padded or not. It
// returns an error wrapping payhook.ErrSignature when sig is empty or not
// base64.
func DecodeBase64(sig string) ([]byte, error) {
	if sig == "" {
		return nil, fmt.Errorf("empty signature: %w", payhook.ErrSignature)
	}
	b, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		b, err = base64.RawStdEncoding.DecodeString(sig)
	}
	if err != nil {
		return nil, fmt.Errorf("signature %q is not base64: %w", Abbrev(sig), payhook.ErrSignature)
	}
	return b, nil
}

// Abbrev shortens s to at most 16 bytes plus "..." so that untrusted
// header values quoted in error messages stay short.
func Abbrev(s string) string {
	const limit = 16
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
