package signing

import (
	"fmt"
	"strings"

	"github.com/payhook/payhook"
)

// Params splits a signature header of key=value entries separated by sep,
// such as Stripe's "t=1,v1=ab,v1=cd", into the values of each key in
// order. Blank entries are skipped. It returns an error wrapping
// payhook.ErrSignature when the header is empty or an entry has no "=".
func Params(header, sep string) (map[string][]string, error) {
	if strings.TrimSpace(header) == "" {
		return nil, fmt.Errorf("empty header: %w", payhook.ErrSignature)
	}
	out := make(map[string][]string)
	for entry := range strings.SplitSeq(header, sep) {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q is not key=value: %w", Abbrev(entry), payhook.ErrSignature)
		}
		out[strings.TrimSpace(k)] = append(out[strings.TrimSpace(k)], strings.TrimSpace(v))
	}
	return out, nil
}
