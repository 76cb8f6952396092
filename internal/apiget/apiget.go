// Package apiget reads one resource from a provider's HTTP API with a
// bearer key: the part every provider client shares.
package apiget

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// maxBody bounds a resource read.
const maxBody = 1 << 20

// Get GETs baseURL + "/" + path with "Authorization: Bearer key" and
// returns the body of a 200. A 404 is an error wrapping
// payhook.ErrNotFound; any other failure is a plain error, to be retried.
// hc nil means a client with a 10 s timeout.
func Get(ctx context.Context, hc *http.Client, baseURL, key, path string) ([]byte, error) {
	b, _, err := GetWith(ctx, hc, baseURL, key, path, nil)
	return b, err
}

// GetWith is Get that also sends the headers h (an API version, ...) and
// returns the answer's headers with its body.
func GetWith(ctx context.Context, hc *http.Client, baseURL, key, path string, h http.Header) ([]byte, http.Header, error) {
	resp, b, err := get(ctx, hc, baseURL, key, path, nil, h, maxBody)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, nil, fmt.Errorf("GET /%s: %w", path, payhook.ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return nil, nil, fmt.Errorf("GET /%s: %s: %.200s", path, resp.Status, b)
	}
	return b, resp.Header, nil
}

// maxPage bounds a page of a list.
const maxPage = 16 << 20

// List GETs baseURL + "/" + path + "?" + q with "Authorization: Bearer
// key" and returns the body of a 200: one page of a list. Any other status
// is an *APIError (with the Retry-After asked, if any); a body
// over 16 MiB, or failing to reach the API, is a plain error.
func List(ctx context.Context, hc *http.Client, baseURL, key, path string, q url.Values) ([]byte, error) {
	b, _, err := ListWith(ctx, hc, baseURL, key, path, q, nil)
	return b, err
}

// ListWith is List that also sends the headers h (an API version, ...)
// and returns the answer's headers with its body.
func ListWith(ctx context.Context, hc *http.Client, baseURL, key, path string, q url.Values, h http.Header) ([]byte, http.Header, error) {
	resp, b, err := get(ctx, hc, baseURL, key, path, q, h, maxPage+1)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		// An HTTP-date Retry-After is read against the answer's own Date.
		now, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			now = time.Now()
		}
		return nil, nil, &APIError{Method: http.MethodGet, Path: "/" + path, Status: resp.StatusCode,
			RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), now),
			Body:       payhook.Storable(string(b[:min(len(b), 200)]))}
	}
	if len(b) > maxPage {
		return nil, nil, fmt.Errorf("GET /%s: a page over %d bytes: %w", path, maxPage, payhook.ErrMalformed)
	}
	return b, resp.Header, nil
}

// get sends GET baseURL/path?q with the headers h and the bearer key
// (hc nil: a client with a 10 s timeout) and returns the answer with at
// most limit bytes of its body, whatever its status.
func get(ctx context.Context, hc *http.Client, baseURL, key, path string, q url.Values, h http.Header, limit int64) (*http.Response, []byte, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	target := strings.TrimSuffix(baseURL, "/") + "/" + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("GET /%s: %w", path, err)
	}
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("GET /%s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, nil, fmt.Errorf("GET /%s: read the answer: %w", path, err)
	}
	return resp, b, nil
}

// APIError is a provider API's answer other than 200.
type APIError struct {
	// Method and Path are the request's, e.g. "GET" and "/v1/events".
	Method, Path string
	// URL is the address asked, without its query, when the client
	// says it (Object's answers do): it names the API's base URL in a
	// caller's error.
	URL string
	// Status is the HTTP status.
	Status int
	// RetryAfter is the Retry-After the API asked for (in seconds or as an
	// HTTP date); zero when it asked none.
	RetryAfter time.Duration
	// Body is the start of the answer's body, for the error text.
	Body string
}

func (e *APIError) Error() string {
	s := fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, http.StatusText(e.Status))
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// Temporary reports whether the request is worth sending again: the API
// was rate-limiting (429) or failing (5xx).
func (e *APIError) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// ParseRetryAfter reads a Retry-After header value (seconds, or an HTTP
// date relative to now); zero when it is empty or unreadable.
func ParseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
