package standard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// Sign returns the headers a Standard Webhooks sender attaches to body:
// webhook-id, webhook-timestamp and a v1 signature made with secret
// ("whsec_<base64>"). Senders (payhook sim, payhook send, tests) use it.
// It returns an error wrapping payhook.ErrConfig for a malformed secret.
func Sign(secret, id string, at time.Time, body []byte) (http.Header, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || !strings.HasPrefix(secret, SecretPrefix) || len(key) == 0 {
		return nil, fmt.Errorf("standard: signing secret must be %s<base64>: %w", SecretPrefix, payhook.ErrConfig)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.", id, ts)
	m.Write(body)
	h := http.Header{}
	h.Set(IDHeader, id)
	h.Set(TimestampHeader, ts)
	h.Set(SignatureHeader, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	return h, nil
}
