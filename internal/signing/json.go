package signing

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/payhook/payhook"
)

// Object is a JSON object of a verified body, its members left raw. Get
// one with ParseObject, a nested one with Object.Object or
// Object.Objects. It is payhook's one JSON reader: the providers read
// envelopes with it, the billing mappings whole payloads.
//
// Its readers refuse a field that also appears under a name differing
// only in case ("id" beside "ID"): encoding/json matches names
// case-insensitively, so an application decoding the stored payload
// into a struct could read the other one.
type Object struct {
	path    string // of this object, "" or "data.object.", for errors
	members []member
}

// member is one name and its raw value. Both are slices of the parsed
// bytes, unless the name had escapes.
type member struct {
	name  []byte
	value jsontext.Value
}

// trusted are the options of a decoder that reads again what ParseObject
// has validated: checking names and UTF-8 once is enough.
var trusted = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

// ParseObject parses body, which must be one strict JSON object: it
// returns an error wrapping payhook.ErrMalformed when body is not JSON,
// not an object, has data after the object, or anywhere in it holds a
// duplicate member name, invalid UTF-8 or a lone surrogate escape
// ("\ud800"), any of which could make two readers of the same signed
// bytes see different events. Call it only after the signature over body
// matched.
func ParseObject(body []byte) (Object, error) {
	// jsontext by default enforces RFC 8259's "names SHOULD be unique"
	// and RFC 7493 (I-JSON: UTF-8 only, no unpaired surrogates) on
	// everything it reads, nested objects and arrays included; one pass
	// reads the top level and validates every value in it. From a
	// bytes.Buffer it reads in place, without a copy.
	dec := jsontext.NewDecoder(bytes.NewBuffer(body))
	o, err := readObject(dec, body, "")
	if err != nil {
		return Object{}, err
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		return Object{}, fmt.Errorf("body has data after its JSON object: %w", payhook.ErrMalformed)
	}
	return o, nil
}

// ObjectAt parses body with ParseObject and returns the object nested
// at path, such as ("data", "object"), read with Object at each step: an
// empty Object when a step is absent or null. Errors wrap
// payhook.ErrMalformed.
func ObjectAt(body []byte, path ...string) (Object, error) {
	o, err := ParseObject(body)
	for _, field := range path {
		if err != nil {
			break
		}
		o, err = o.Object(field)
	}
	return o, err
}

// readObject reads the object at dec's position in input, the bytes dec
// reads; its members' values are slices of input.
func readObject(dec *jsontext.Decoder, input []byte, path string) (Object, error) {
	malformed := func(err error) (Object, error) {
		return Object{}, fmt.Errorf("%s is not strict JSON: %s: %w", strings.TrimSuffix(cmp.Or(path, "body"), "."), short(err), payhook.ErrMalformed)
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return malformed(err)
	}
	if tok.Kind() != '{' {
		return Object{}, fmt.Errorf("%s is not a JSON object: %w", strings.TrimSuffix(cmp.Or(path, "body"), "."), payhook.ErrMalformed)
	}
	o := Object{path: path}
	for dec.PeekKind() != '}' {
		// Read as a value, a name is its quoted bytes: most have no
		// escapes, and their text is those bytes less the quotes.
		quoted, err := dec.ReadValue()
		if err != nil {
			return malformed(err)
		}
		end := int(dec.InputOffset())
		name := input[end-len(quoted)+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			if name, err = jsontext.AppendUnquote(nil, quoted); err != nil {
				return malformed(err)
			}
		}
		v, err := dec.ReadValue()
		if err != nil {
			return malformed(err)
		}
		end = int(dec.InputOffset())
		o.members = append(o.members, member{name, jsontext.Value(input[end-len(v) : end])})
	}
	if _, err := dec.ReadToken(); err != nil { // '}'
		return malformed(err)
	}
	return o, nil
}

// short returns err's text bounded, since it may quote untrusted input.
func short(err error) string {
	const limit = 160
	s := err.Error()
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "..."
	}
	return s
}

// Has reports whether field is present and not null. It returns an error
// wrapping payhook.ErrMalformed when a name differing only in case is
// present too.
func (o Object) Has(field string) (bool, error) {
	v, err := o.value(field)
	return v != nil, err
}

// value returns the raw value of field, or nil when it is absent or null.
func (o Object) value(field string) (jsontext.Value, error) {
	var v jsontext.Value
	f := []byte(field)
	for _, m := range o.members {
		switch {
		case string(m.name) == field:
			v = m.value
		case bytes.EqualFold(m.name, f):
			return nil, fmt.Errorf("field %q appears also as %q: %w", o.path+field, Abbrev(string(m.name)), payhook.ErrMalformed)
		}
	}
	if v.Kind() == 'n' {
		return nil, nil
	}
	return v, nil
}

// Path returns the name of field in errors: its path from the body,
// such as "data.object.amount" or "refunds.data[0].id".
func (o Object) Path(field string) string { return o.path + field }

// Kind returns the kind of the field's value as jsontext writes it: '"'
// string, '0' number, 't' true, 'f' false, '{' object, '[' array, or 0
// when the field is absent or null. It returns an error wrapping
// payhook.ErrMalformed when a name differing only in case is present too.
func (o Object) Kind(field string) (jsontext.Kind, error) {
	v, err := o.value(field)
	if err != nil || v == nil {
		return 0, err
	}
	return v.Kind(), nil
}

// Number returns the literal text of the number field, exactly as the
// body writes it ("1099", "-0", "1e3"), or "" when it is absent or null.
// It returns an error wrapping payhook.ErrMalformed when the field holds
// something else than a number.
func (o Object) Number(field string) (string, error) {
	v, err := o.value(field)
	if err != nil || v == nil {
		return "", err
	}
	if v.Kind() != '0' {
		return "", fmt.Errorf("field %q is not a number: %w", o.path+field, payhook.ErrMalformed)
	}
	return string(v), nil
}

// Objects returns the objects of the array field, nil when it is absent
// or null. It returns an error wrapping payhook.ErrMalformed when the
// field holds something else than an array, or the array something else
// than objects.
func (o Object) Objects(field string) ([]Object, error) {
	v, err := o.value(field)
	if err != nil || v == nil {
		return nil, err
	}
	name := o.path + field
	if v.Kind() != '[' {
		return nil, fmt.Errorf("field %q is not an array: %w", name, payhook.ErrMalformed)
	}
	dec := jsontext.NewDecoder(bytes.NewBuffer(v), trusted...)
	if _, err := dec.ReadToken(); err != nil { // '['; not after ParseObject
		return nil, fmt.Errorf("field %q: %s: %w", name, short(err), payhook.ErrMalformed)
	}
	var out []Object
	for i := 0; dec.PeekKind() != ']'; i++ {
		elem := fmt.Sprintf("%s[%d]", name, i)
		if dec.PeekKind() != '{' {
			return nil, fmt.Errorf("field %q is not an object: %w", elem, payhook.ErrMalformed)
		}
		e, err := readObject(dec, v, elem+".")
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Object returns the nested object field; an empty Object when it is
// absent or null. It returns an error wrapping payhook.ErrMalformed when
// the field holds something else than an object.
func (o Object) Object(field string) (Object, error) {
	v, err := o.value(field)
	if err != nil || v == nil {
		return Object{path: o.path + field + "."}, err
	}
	if v.Kind() != '{' {
		return Object{}, fmt.Errorf("field %q is not an object: %w", o.path+field, payhook.ErrMalformed)
	}
	return readObject(jsontext.NewDecoder(bytes.NewBuffer(v), trusted...), v, o.path+field+".")
}

// String returns the string field, or "" when it is absent or null. It
// returns an error wrapping payhook.ErrMalformed when the field holds
// something else than a string.
func (o Object) String(field string) (string, error) {
	v, err := o.value(field)
	if err != nil || v == nil {
		return "", err
	}
	if v.Kind() != '"' {
		return "", fmt.Errorf("field %q is not a string: %w", o.path+field, payhook.ErrMalformed)
	}
	b, err := jsontext.AppendUnquote(nil, v)
	if err != nil { // not after ParseObject, which validated every string
		return "", fmt.Errorf("field %q: %s: %w", o.path+field, short(err), payhook.ErrMalformed)
	}
	return string(b), nil
}

// RequiredString returns the string field. It returns an error wrapping
// payhook.ErrMalformed when the field is absent, empty or not a string.
func (o Object) RequiredString(field string) (string, error) {
	s, err := o.String(field)
	if err != nil {
		return "", err
	}
	if s == "" {
		return "", fmt.Errorf("field %q is missing: %w", o.path+field, payhook.ErrMalformed)
	}
	return s, nil
}

// ID returns an identifier field that may be a JSON string or an integer
// (some providers number their events). It returns an error wrapping
// payhook.ErrMalformed when the field is absent, empty or of another kind.
func (o Object) ID(field string) (string, error) {
	v, err := o.value(field)
	switch {
	case err != nil:
		return "", err
	case v == nil:
		return "", fmt.Errorf("field %q is missing: %w", o.path+field, payhook.ErrMalformed)
	case v.Kind() == '"':
		return o.RequiredString(field)
	case v.Kind() != '0':
		return "", fmt.Errorf("field %q is neither a string nor a number: %w", o.path+field, payhook.ErrMalformed)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return "", fmt.Errorf("field %q is not an integer: %w", o.path+field, payhook.ErrMalformed)
	}
	return strconv.FormatInt(n, 10), nil
}

// Bool returns the boolean field and whether it was present. It returns an
// error wrapping payhook.ErrMalformed when the field is not a boolean.
func (o Object) Bool(field string) (v, ok bool, err error) {
	raw, err := o.value(field)
	if err != nil || raw == nil {
		return false, false, err
	}
	switch raw.Kind() {
	case 't':
		return true, true, nil
	case 'f':
		return false, true, nil
	}
	return false, false, fmt.Errorf("field %q is not a boolean: %w", o.path+field, payhook.ErrMalformed)
}

// UnixTime returns the time of a field of whole seconds since the Unix
// epoch, or the zero time when the field is absent. It returns an error
// wrapping payhook.ErrMalformed when the field is not an integer or falls
// outside payhook.MinTime..MaxTime (milliseconds do).
func (o Object) UnixTime(field string) (time.Time, error) {
	v, err := o.value(field)
	if err != nil || v == nil {
		return time.Time{}, err
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if v.Kind() != '0' || err != nil {
		return time.Time{}, fmt.Errorf("field %q is not unix seconds: %w", o.path+field, payhook.ErrMalformed)
	}
	t, err := payhook.UnixSeconds("field "+strconv.Quote(o.path+field), n)
	if err != nil {
		return time.Time{}, err
	}
	return t, nil
}

// RFC3339Time returns the time of an RFC 3339 string field, or the zero
// time when the field is absent. It returns an error wrapping
// payhook.ErrMalformed when the field is not such a string or its time
// falls outside payhook.MinTime..MaxTime.
func (o Object) RFC3339Time(field string) (time.Time, error) {
	s, err := o.String(field)
	if err != nil || s == "" {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("field %q is not an RFC 3339 time: %w", o.path+field, payhook.ErrMalformed)
	}
	t = t.UTC()
	// CheckTime lets the zero time pass as "unknown"; written out, it is
	// as far outside the window as any other.
	if t.IsZero() {
		return time.Time{}, fmt.Errorf("field %q is the zero time: %w", o.path+field, payhook.ErrMalformed)
	}
	if err := payhook.CheckTime("field "+strconv.Quote(o.path+field), t); err != nil {
		return time.Time{}, err
	}
	return t, nil
}

// Time returns the time of a field holding either unix seconds or an
// RFC 3339 string, or the zero time when the field is absent. It returns
// an error wrapping payhook.ErrMalformed for anything else, and for a time
// outside payhook.MinTime..MaxTime.
func (o Object) Time(field string) (time.Time, error) {
	v, err := o.value(field)
	if err != nil || v == nil {
		return time.Time{}, err
	}
	if v.Kind() == '"' {
		return o.RFC3339Time(field)
	}
	return o.UnixTime(field)
}

// CheckEnvelope returns an error wrapping payhook.ErrMalformed when env,
// as a provider read it, could not be stored and deduplicated as it is:
// no event id, an event id, type or environment that payhook.CheckRef
// refuses (control and format characters, U+FFFD, over MaxRefBytes), or
// an occurred-at time outside payhook.MinTime..MaxTime. Every provider
// calls it last, so an accepted envelope always passes it.
func CheckEnvelope(env payhook.Envelope) error {
	if env.EventID == "" {
		return fmt.Errorf("no event id: %w", payhook.ErrMalformed)
	}
	for _, f := range []struct{ what, value string }{
		{"event id", env.EventID}, {"event type", env.Type}, {"environment", env.Environment},
	} {
		if err := payhook.CheckRef(f.what, f.value); err != nil {
			return err
		}
	}
	return payhook.CheckTime("occurred_at", env.OccurredAt)
}
