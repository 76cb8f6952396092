// Package apiget reads one resource from a provider's HTTP API with a
// bearer key: the part every provider client shares.
package apiget

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(baseURL, "/")+"/"+path, nil)
	if err != nil {
		return nil, fmt.Errorf("GET /%s: %w", path, err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /%s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("GET /%s: %w", path, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("GET /%s: %w", path, payhook.ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET /%s: %s: %.200s", path, resp.Status, b)
	}
	return b, nil
}
