package hmac

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// Config configures a Verifier. Errors in it wrap payhook.ErrConfig.
type Config struct {
	// Secrets are the HMAC keys, used as their bytes. Several may be given
	// while a secret is rotated; at least one is required.
	Secrets []string
	// Tolerance is how far the timestamp header may be from the receipt
	// time, in either direction. If zero, defaults to 5 minutes. Unused
	// without TimestampHeader.
	Tolerance time.Duration

	// Header is the name of the signature header. Required.
	Header string
	// Prefix, if set, must start the signature header's value and is cut
	// before decoding, e.g. "sha256=".
	Prefix string
	// Encoding of the signature: "hex" or "base64" (standard alphabet,
	// padded or not). If empty, defaults to "hex".
	Encoding string
	// TimestampHeader, if set, names a header of unix seconds that every
	// delivery must carry and that is checked against Tolerance. It is
	// required exactly when the template signs {timestamp}: an unsigned
	// timestamp header proves nothing, since a captured body would verify
	// with any fresh one.
	TimestampHeader string
	// Template is the signed string. Placeholders: {body} (the raw body,
	// required), {timestamp} (the TimestampHeader value, which must then
	// be set) and {header:Name} (the value of header Name, which every
	// delivery must then carry). If empty, defaults to "{body}".
	Template string

	// IDField is the top-level JSON field holding the event id, a string
	// or an integer. If empty, defaults to "id". Ignored with IDHeader.
	IDField string
	// IDHeader, if set, names the header holding the event id instead of
	// IDField. Because the id is what deduplicates deliveries, the
	// template must sign it ({header:Name}), so that a replayed body
	// cannot pass as a new event.
	IDHeader string
	// TypeField is the top-level JSON string field holding the event type.
	// If empty, defaults to "type"; the type may be absent.
	TypeField string
	// TimeField, if set, is the top-level JSON field holding when the
	// event occurred, in unix seconds or as an RFC 3339 string.
	TimeField string
}

// The encodings of Config.Encoding.
const (
	EncodingHex    = "hex"
	EncodingBase64 = "base64"
)

// part is one piece of a parsed template.
type part struct {
	kind  partKind
	value string // literal text or header name
}

type partKind int

const (
	literal partKind = iota
	body
	timestamp
	header
)

// withDefaults returns cfg with its defaults applied, or an error wrapping
// payhook.ErrConfig.
func (cfg Config) withDefaults() (Config, []part, error) {
	if cfg.Header == "" {
		return cfg, nil, fmt.Errorf("no signature header configured (Header; header in payhook.yaml): %w", payhook.ErrConfig)
	}
	for _, h := range []string{cfg.Header, cfg.TimestampHeader, cfg.IDHeader} {
		if strings.ContainsAny(h, " \t:{}") {
			return cfg, nil, fmt.Errorf("header name %q is invalid: %w", h, payhook.ErrConfig)
		}
	}
	switch cfg.Encoding = strings.ToLower(cfg.Encoding); cfg.Encoding {
	case "":
		cfg.Encoding = EncodingHex
	case EncodingHex, EncodingBase64:
	default:
		return cfg, nil, fmt.Errorf("encoding %q is neither hex nor base64: %w", cfg.Encoding, payhook.ErrConfig)
	}
	if cfg.Template == "" {
		cfg.Template = "{body}"
	}
	if cfg.IDField == "" {
		cfg.IDField = "id"
	}
	if cfg.TypeField == "" {
		cfg.TypeField = "type"
	}
	parts, err := parseTemplate(cfg.Template)
	if err != nil {
		return cfg, nil, err
	}
	var hasBody, hasTimestamp, hasID bool
	for _, p := range parts {
		switch p.kind {
		case body:
			hasBody = true
		case timestamp:
			hasTimestamp = true
		case header:
			hasID = hasID || (cfg.IDHeader != "" && http.CanonicalHeaderKey(p.value) == http.CanonicalHeaderKey(cfg.IDHeader))
		}
	}
	switch {
	case !hasBody:
		return cfg, nil, fmt.Errorf("template %q does not sign {body}: %w", cfg.Template, payhook.ErrConfig)
	case hasTimestamp && cfg.TimestampHeader == "":
		return cfg, nil, fmt.Errorf("template %q uses {timestamp} but no timestamp header is set (TimestampHeader; timestamp_header in payhook.yaml): %w", cfg.Template, payhook.ErrConfig)
	case !hasTimestamp && cfg.TimestampHeader != "":
		return cfg, nil, fmt.Errorf("timestamp header %s is set (TimestampHeader; timestamp_header in payhook.yaml) but template %q does not sign {timestamp}, "+
			"so a captured body would verify with any fresh timestamp: %w", cfg.TimestampHeader, cfg.Template, payhook.ErrConfig)
	case cfg.IDHeader != "" && !hasID:
		return cfg, nil, fmt.Errorf("template %q does not sign the id header {header:%s}: %w", cfg.Template, cfg.IDHeader, payhook.ErrConfig)
	}
	return cfg, parts, nil
}

// parseTemplate splits a template into literals and placeholders.
func parseTemplate(tmpl string) ([]part, error) {
	var parts []part
	for rest := tmpl; rest != ""; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			parts = append(parts, part{kind: literal, value: rest})
			break
		}
		if open > 0 {
			parts = append(parts, part{kind: literal, value: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, fmt.Errorf("template %q has an unclosed {: %w", tmpl, payhook.ErrConfig)
		}
		name := rest[open+1 : open+end]
		switch {
		case name == "body":
			parts = append(parts, part{kind: body})
		case name == "timestamp":
			parts = append(parts, part{kind: timestamp})
		case strings.HasPrefix(name, "header:") && len(name) > len("header:"):
			parts = append(parts, part{kind: header, value: name[len("header:"):]})
		default:
			return nil, fmt.Errorf("template %q has unknown placeholder {%s}: %w", tmpl, name, payhook.ErrConfig)
		}
		rest = rest[open+end+1:]
	}
	return parts, nil
}
