package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/payhook/payhook/internal/dbtest"
)

// TestHeaderLimit: payhook serve answers 431 to a request whose headers
// pass 64 KiB, and reads headers under it (the demo source then refuses
// the unsigned delivery with 400). Before, Go's default allowed 1 MiB.
func TestHeaderLimit(t *testing.T) {
	s := startServer(t, map[string]string{"PAYHOOK_DB": dbtest.URL(t, "sqlite")})
	for _, tc := range []struct {
		size int
		want int
	}{
		{60 << 10, http.StatusBadRequest},
		{100 << 10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		req, _ := http.NewRequest(http.MethodPost, s.url+"/webhooks/demo", strings.NewReader(`{}`))
		req.Header.Set("X-Padding", strings.Repeat("p", tc.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%d KiB of headers = %d, want %d", tc.size>>10, resp.StatusCode, tc.want)
		}
	}
}
