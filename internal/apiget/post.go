package apiget

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// Post POSTs body (of type contentType) to baseURL + "/" + path with
// "Authorization: Bearer key" and the headers h, and returns the body and
// headers of a 200 or 201. Any other status is an *APIError; failing to
// reach the API is a plain error. hc nil means a client with a 10 s
// timeout.
func Post(ctx context.Context, hc *http.Client, baseURL, key, path, contentType string, body []byte, h http.Header) ([]byte, http.Header, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	target := strings.TrimSuffix(baseURL, "/") + "/" + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("POST /%s: %w", path, err)
	}
	for k, vs := range h {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("POST /%s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, nil, fmt.Errorf("POST /%s: read the answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		now, err := http.ParseTime(resp.Header.Get("Date"))
		if err != nil {
			now = time.Now()
		}
		return nil, nil, &APIError{Method: http.MethodPost, Path: "/" + path, Status: resp.StatusCode,
			RetryAfter: ParseRetryAfter(resp.Header.Get("Retry-After"), now),
			Body:       payhook.Storable(string(b[:min(len(b), 200)]))}
	}
	return b, resp.Header, nil
}
