package signing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/payhook/payhook"
)

// Object is the top level of a verified JSON body, its fields left raw.
type Object map[string]json.RawMessage

// ParseObject parses body, which must be a JSON object. It returns an
// error wrapping payhook.ErrMalformed otherwise. Call it only after the
// signature over body matched.
func ParseObject(body []byte) (Object, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("body is not a JSON object: %w", payhook.ErrMalformed)
	}
	var o Object
	if err := json.Unmarshal(trimmed, &o); err != nil {
		return nil, fmt.Errorf("body is not a JSON object: %v: %w", err, payhook.ErrMalformed)
	}
	return o, nil
}

// has reports whether field is present and not null.
func (o Object) has(field string) bool {
	raw, ok := o[field]
	return ok && !bytes.Equal(raw, []byte("null"))
}

// String returns the string field, or "" when it is absent or null. It
// returns an error wrapping payhook.ErrMalformed when the field holds
// something else than a string.
func (o Object) String(field string) (string, error) {
	if !o.has(field) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(o[field], &s); err != nil {
		return "", fmt.Errorf("field %q is not a string: %w", field, payhook.ErrMalformed)
	}
	return s, nil
}

// RequiredString returns the string field. It returns an error wrapping
// payhook.ErrMalformed when the field is absent, empty or not a string.
func (o Object) RequiredString(field string) (string, error) {
	s, err := o.String(field)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", fmt.Errorf("field %q is missing: %w", field, payhook.ErrMalformed)
	}
	return s, nil
}

// ID returns an identifier field that may be a JSON string or an integer
// (some providers number their events). It returns an error wrapping
// payhook.ErrMalformed when the field is absent, empty or of another kind.
func (o Object) ID(field string) (string, error) {
	if !o.has(field) {
		return "", fmt.Errorf("field %q is missing: %w", field, payhook.ErrMalformed)
	}
	raw := o[field]
	if raw[0] != '"' {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", fmt.Errorf("field %q is neither a string nor a number: %w", field, payhook.ErrMalformed)
		}
		if _, err := strconv.ParseInt(n.String(), 10, 64); err != nil {
			return "", fmt.Errorf("field %q is not an integer: %w", field, payhook.ErrMalformed)
		}
		return n.String(), nil
	}
	return o.RequiredString(field)
}

// Bool returns the boolean field and whether it was present. It returns an
// error wrapping payhook.ErrMalformed when the field is not a boolean.
func (o Object) Bool(field string) (v, ok bool, err error) {
	if !o.has(field) {
		return false, false, nil
	}
	if err := json.Unmarshal(o[field], &v); err != nil {
		return false, false, fmt.Errorf("field %q is not a boolean: %w", field, payhook.ErrMalformed)
	}
	return v, true, nil
}

// UnixTime returns the time of a field of whole seconds since the Unix
// epoch, or the zero time when the field is absent. It returns an error
// wrapping payhook.ErrMalformed when the field is not an integer.
func (o Object) UnixTime(field string) (time.Time, error) {
	if !o.has(field) {
		return time.Time{}, nil
	}
	var n int64
	if err := json.Unmarshal(o[field], &n); err != nil {
		return time.Time{}, fmt.Errorf("field %q is not unix seconds: %w", field, payhook.ErrMalformed)
	}
	return time.Unix(n, 0).UTC(), nil
}

// RFC3339Time returns the time of an RFC 3339 string field, or the zero
// time when the field is absent. It returns an error wrapping
// payhook.ErrMalformed when the field is not such a string.
func (o Object) RFC3339Time(field string) (time.Time, error) {
	s, err := o.String(field)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("field %q is not an RFC 3339 time: %w", field, payhook.ErrMalformed)
	}
	return t.UTC(), nil
}

// Time returns the time of a field holding either unix seconds or an
// RFC 3339 string, or the zero time when the field is absent. It returns
// an error wrapping payhook.ErrMalformed for anything else.
func (o Object) Time(field string) (time.Time, error) {
	if o.has(field) && o[field][0] == '"' {
		return o.RFC3339Time(field)
	}
	return o.UnixTime(field)
}
