package outbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/payhook/payhook"
)

// HTTPConfig configures an HTTP sink.
type HTTPConfig struct {
	// URL receives each fact as a POST. Only http and https, no userinfo;
	// see CheckURL. Required.
	URL string
	// Secret signs each request the Standard Webhooks way: "whsec_" and
	// the base64 of the key. Required.
	Secret string
	// AllowPrivate lets URL reach loopback, private, link-local and
	// metadata addresses (tests, an application on the same host).
	AllowPrivate bool
	// Timeout bounds one request, answer included. Default 10 seconds.
	Timeout time.Duration
	// Now is the clock of webhook-timestamp. Default time.Now.
	Now func() time.Time
}

// HTTP is a sink that POSTs each fact's JSON to a URL, signed the Standard
// Webhooks way (webhook-id is the fact's id, by which the receiver
// deduplicates; webhook-timestamp; webhook-signature "v1,<base64 of the
// HMAC-SHA256 of id.timestamp.body>"). A 2xx is success; anything else,
// a redirect included (redirects are not followed), is an error retried
// with backoff; 410 Gone is ErrGone, which pauses the sink. The address
// it dials is checked again at each connection (see CheckURL), so a name
// that resolves to a private address is refused too.
type HTTP struct {
	cfg    HTTPConfig
	key    []byte
	client *http.Client
}

// NewHTTP returns the HTTP sink of cfg. It returns an error wrapping
// payhook.ErrConfig for a URL that CheckURL refuses or a secret that is
// not "whsec_" and base64.
func NewHTTP(cfg HTTPConfig) (*HTTP, error) {
	if _, err := CheckURL(cfg.URL, cfg.AllowPrivate); err != nil {
		return nil, err
	}
	key, err := DecodeSecret(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, Control: dialControl(cfg.AllowPrivate)}
	transport := &http.Transport{
		// No proxy: the address checked at dial must be the receiver's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	client := &http.Client{
		Transport: transport,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return &HTTP{cfg: cfg, key: key, client: client}, nil
}

// DecodeSecret returns the key of a Standard Webhooks secret, "whsec_" and
// base64. It returns an error wrapping payhook.ErrConfig for anything else.
func DecodeSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, fmt.Errorf("sink secret: must start with whsec_: %w", payhook.ErrConfig)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(key) < 16 {
		return nil, fmt.Errorf("sink secret: whsec_ must be followed by the base64 of at least 16 bytes: %w", payhook.ErrConfig)
	}
	return key, nil
}

// Target returns the sink's URL: what a pause is for.
func (h *HTTP) Target() string { return h.cfg.URL }

// maxResponse bounds what is read of an answer.
const maxResponse = 4 << 10

// Send posts f, signed.
func (h *HTTP) Send(ctx context.Context, f Fact) (Receipt, error) {
	body, err := json.Marshal(f)
	if err != nil {
		return Receipt{}, fmt.Errorf("marshal fact %s: %w", f.ID, err)
	}
	ts := strconv.FormatInt(h.cfg.Now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return Receipt{}, fmt.Errorf("request for fact %s: %w", f.ID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "payhook")
	req.Header.Set("webhook-id", f.ID)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+Sign(h.key, f.ID, ts, body))
	resp, err := h.client.Do(req)
	if err != nil {
		return Receipt{}, fmt.Errorf("post fact %s: %w", f.ID, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	rec := Receipt{Status: resp.StatusCode, Response: string(answer)}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return rec, nil
	case resp.StatusCode == http.StatusGone:
		return rec, fmt.Errorf("post fact %s: %s: %w", f.ID, resp.Status, ErrGone)
	}
	return rec, fmt.Errorf("post fact %s: %s", f.ID, resp.Status)
}

// Sign returns the Standard Webhooks signature (without "v1,") of body
// sent as message id at timestamp ts: base64 of HMAC-SHA256(key,
// id.ts.body).
func Sign(key []byte, id, ts string, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// CheckURL parses raw as the URL of an outbound sink and refuses (with an
// error wrapping payhook.ErrConfig) anything but http and https, userinfo,
// a missing host, and, unless allowPrivate, a host that is a loopback,
// private, link-local (cloud metadata: 169.254.169.254), unspecified,
// multicast or otherwise non-public address, or a name for the local host
// (localhost). Names are resolved only when dialled, where the address is
// checked again.
func CheckURL(raw string, allowPrivate bool) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("sink url %q: %v: %w", raw, err, payhook.ErrConfig)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("sink url %q: scheme must be http or https: %w", raw, payhook.ErrConfig)
	case u.User != nil:
		return nil, fmt.Errorf("sink url %q: no user or password in the URL: %w", redactURL(u), payhook.ErrConfig)
	case u.Hostname() == "":
		return nil, fmt.Errorf("sink url %q: no host: %w", raw, payhook.ErrConfig)
	}
	if allowPrivate {
		return u, nil
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return nil, fmt.Errorf("sink url %q: %s is the local host (set allow_private to allow it): %w", raw, host, payhook.ErrConfig)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if why := nonPublic(ip); why != "" {
			return nil, fmt.Errorf("sink url %q: %s is a %s address (set allow_private to allow it): %w", raw, ip, why, payhook.ErrConfig)
		}
	}
	return u, nil
}

func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// extraNonPublic are ranges netip's predicates do not cover.
var extraNonPublic = []struct {
	prefix netip.Prefix
	why    string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this-network"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared (carrier-grade NAT)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("64:ff9b::/96"), "NAT64"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "metadata"},
}

// nonPublic says which kind of non-public address ip is; "" if public.
func nonPublic(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local (metadata)"
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsMulticast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, r := range extraNonPublic {
		if r.prefix.Contains(ip) {
			return r.why
		}
	}
	return ""
}

// errNonPublic is the dial-time refusal.
var errNonPublic = errors.New("refused to dial a non-public address (set allow_private to allow it)")

// dialControl refuses, at each connection, an address that is not public
// unless allowPrivate: what a name resolved to is checked, not the name.
func dialControl(allowPrivate bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		if allowPrivate {
			return nil
		}
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("dial %s: %w", address, err)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("dial %s: not an address: %w", address, err)
		}
		if why := nonPublic(ip); why != "" {
			return fmt.Errorf("dial %s (%s): %w", address, why, errNonPublic)
		}
		return nil
	}
}
