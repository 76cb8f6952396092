package stripe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/payhook/payhook"
)

// Sign returns the header Stripe attaches to body when it sends it at at,
// signed with secret (the whole "whsec_..." string, as Verifier takes it):
// Stripe-Signature: t=<unix seconds>,v1=<hex>. A program or test that
// sends itself a Stripe delivery uses it. It returns an error wrapping
// payhook.ErrConfig for an empty secret.
func Sign(secret string, at time.Time, body []byte) (http.Header, error) {
	if secret == "" {
		return nil, fmt.Errorf("stripe: empty signing secret: %w", payhook.ErrConfig)
	}
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "."))
	m.Write(body)
	h := http.Header{}
	h.Set(Header, "t="+ts+",v1="+hex.EncodeToString(m.Sum(nil)))
	return h, nil
}
