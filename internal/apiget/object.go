package apiget

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/payhook/payhook"
)

// Object GETs one object, baseURL + "/" + path + "?" + q, with "Authorization:
// Bearer key" and the headers h, and returns the body of a 200. A 404 is
// an error wrapping payhook.ErrNotFound (and an *APIError); any other
// status is an *APIError (a 429 or a 5xx Temporary, with the Retry-After
// asked); failing to reach the API, or an answer over 1 MiB, is a plain
// error. All but the 404 are worth retrying.
func Object(ctx context.Context, hc *http.Client, baseURL, key, path string, q url.Values, h http.Header) ([]byte, error) {
	b, _, err := ObjectWith(ctx, hc, baseURL, key, path, q, h)
	return b, err
}

// ObjectWith is Object that also returns the answer's headers (the API
// version it was rendered in, ...) with its body.
func ObjectWith(ctx context.Context, hc *http.Client, baseURL, key, path string, q url.Values, h http.Header) ([]byte, http.Header, error) {
	resp, b, err := get(ctx, hc, baseURL, key, path, q, h, maxBody+1)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		now, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			now = time.Now()
		}
		e := &APIError{Method: http.MethodGet, Path: "/" + path, URL: resp.Request.URL.Scheme + "://" + resp.Request.URL.Host + resp.Request.URL.EscapedPath(), Status: resp.StatusCode,
			RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), now),
			Body:       payhook.Storable(string(b[:min(len(b), 200)]))}
		if resp.StatusCode == http.StatusNotFound {
			return nil, nil, fmt.Errorf("%w: %w", e, payhook.ErrNotFound)
		}
		return nil, nil, e
	}
	if len(b) > maxBody {
		return nil, nil, fmt.Errorf("GET /%s: an answer over %d bytes", path, maxBody)
	}
	return b, resp.Header, nil
}
