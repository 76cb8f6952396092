package providertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/payhook/payhook"
)

// BadRefs are event ids and types that are valid JSON strings but cannot
// be stored, shown or deduplicated safely: payhook.CheckRef refuses each.
var BadRefs = []string{
	"evt\u2028x", // line separator (Zl)
	"evt\u2029x", // paragraph separator (Zp)
	"evt\u202ex", // right-to-left override (Cf): reverses what an operator reads
	"evt\u200bx", // zero-width space (Cf)
	"evt\ufeffx", // byte order mark (Cf)
	"evt\x00x",   // NUL: PostgreSQL text cannot hold it
	"evt\x07x",   // a C0 control
	"evt\u0085x", // a C1 control
	"evt\ufffdx", // the replacement character, left by a lossy decoding
	"evt\tx",     // a tab
	"evt_" + strings.Repeat("x", payhook.MaxRefBytes-3),
}

// hostileBody is a body signed correctly that the provider must refuse
// with payhook.ErrMalformed, storing nothing.
type hostileBody struct {
	name string
	body []byte
	id   string // for SignID; "" for the id Sign uses
}

// hostile runs the cases of signed bodies that are not strict JSON, or
// whose id, type or time cannot be stored.
func (s Suite) hostile(t *testing.T, v payhook.Verifier, secret string) {
	t.Helper()
	for _, tc := range s.hostileCases(t) {
		t.Run("hostile "+tc.name, func(t *testing.T) {
			t.Parallel()
			d := s.delivery(t, tc.body, secret, Now)
			if tc.id != "" {
				d.Header = s.SignID(t, tc.id, tc.body, secret, Now)
			}
			env, err := v.Verify(d)
			if !errors.Is(err, payhook.ErrMalformed) {
				t.Errorf("Verify(%q) = %+v, %v; want ErrMalformed", abbrev(tc.body), env, err)
			}
			s.refusedEnvelope(t, tc.body)
		})
	}

	if s.TimeField != "" {
		ev := parseEvent(t, s.Event)
		raw, _ := ev.get(s.TimeField)
		t.Run("time at the bounds", func(t *testing.T) {
			t.Parallel()
			for _, at := range []time.Time{payhook.MinTime, payhook.MaxTime} {
				body := ev.with(s.TimeField, timeLike(raw, at)).json()
				env, err := v.Verify(s.delivery(t, body, secret, Now))
				if err != nil || !env.OccurredAt.Equal(at) {
					t.Errorf("Verify(%s %s) = %v, %v; want %v", s.TimeField, timeLike(raw, at), env.OccurredAt, err, at)
				}
			}
		})
	}
}

// hostileCases derives the hostile bodies from s.Event.
func (s Suite) hostileCases(t testing.TB) []hostileBody {
	t.Helper()
	ev := parseEvent(t, s.Event)
	var cases []hostileBody
	add := func(name string, body []byte) { cases = append(cases, hostileBody{name: name, body: body}) }

	// Anywhere in the body, read or not.
	for _, c := range []struct{ name, raw string }{
		{"invalid UTF-8", "\"\xff\""},
		{"invalid UTF-8 deep", "{\"a\":[\"ok\",\"\xc3\x28\"]}"},
		{"overlong UTF-8", "\"\xc0\xaf\""},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\""},
		{"lone high surrogate", `"\ud800"`},
		{"lone low surrogate", `"x\udc00"`},
		{"reversed surrogates", `"\udc00\ud800"`},
		{"high surrogate then letter", `"\ud83dx"`},
		{"duplicate name deep", `{"a":1,"a":2}`},
		{"duplicate name in an array", `[{"a":{"b":1,"b":1}}]`},
		{"invalid UTF-8 in a name", "{\"\xff\":1}"},
	} {
		add(c.name+" in an unread field", ev.prepend("zz_note", c.raw).json())
	}
	add("a second object after the body", append(slices.Clone(s.Event), []byte(` {}`)...))
	add("a second value after the body", append(slices.Clone(s.Event), []byte(` "x"`)...))

	// The fields payhook reads: duplicated, or beside a case variant.
	read := slices.DeleteFunc([]string{s.IDField, s.TypeField, s.TimeField}, func(f string) bool { return f == "" })
	read = append(read, s.ReadFields...)
	for _, f := range read {
		raw, ok := ev.get(f)
		if !ok {
			t.Fatalf("Suite: Event has no field %q", f)
		}
		add("duplicate "+f, ev.prepend(f, raw).json())
		add("duplicate "+f+" after", ev.with(f, raw).appendMember(f, raw).json())
		add(f+" beside "+strings.ToUpper(f), ev.prepend(strings.ToUpper(f), raw).json())
		add(f+" beside "+titled(f)+" after", ev.appendMember(titled(f), raw).json())
		if f == s.IDField {
			add("duplicate "+f+" with another value", ev.prepend(f, `"evt_other"`).json())
		}
	}
	for _, bad := range BadRefs {
		if s.IDField != "" {
			c := hostileBody{name: fmt.Sprintf("id %q", bad), body: ev.with(s.IDField, quote(bad)).json()}
			if s.SignID != nil {
				c.id = bad
			}
			cases = append(cases, c)
		} else if s.SignID != nil {
			cases = append(cases, hostileBody{name: fmt.Sprintf("header id %q", bad), body: s.Event, id: bad})
		}
		if s.TypeField != "" {
			add(fmt.Sprintf("type %q", bad), ev.with(s.TypeField, quote(bad)).json())
		}
	}
	if s.IDField != "" {
		// The escaped forms of what BadRefs hold raw.
		for _, raw := range []string{`"evt\u2028x"`, `"evt\u202Ex"`, `"evt\u0000x"`, `"evt\uFFFDx"`, `"evt\u001fx"`} {
			id, err := strconv.Unquote(raw) // Go reads these escapes as JSON does
			if err != nil {
				t.Fatal(err)
			}
			c := hostileBody{name: "escaped id " + raw, body: ev.with(s.IDField, raw).json()}
			if s.SignID != nil {
				c.id = id
			}
			cases = append(cases, c)
		}
	}
	if s.TimeField != "" {
		raw, _ := ev.get(s.TimeField)
		for _, bad := range badTimes(raw) {
			add(fmt.Sprintf("%s %s", s.TimeField, bad), ev.with(s.TimeField, bad).json())
		}
	}

	return cases
}

// badTimes returns out-of-range times written like raw, an example.
func badTimes(raw string) []string {
	if strings.HasPrefix(raw, `"`) {
		return []string{
			`"1999-12-31T23:59:59Z"`, `"2200-01-01T00:00:01Z"`, `"2200-01-01T00:00:00-00:01"`,
			`"0001-01-01T00:00:00Z"`, `"9999-12-31T23:59:59.999999999Z"`,
		}
	}
	return []string{
		"10000000000000", // the "created": year ~318857
		strconv.FormatInt(Now.UnixMilli(), 10),
		"1001796109157",
		"946684799", "7258118401", "0", "-1", "-9223372036854775808", "9223372036854775807",
		"99999999999999999999", "1.7e9", "1768470000.5",
	}
}

// timeLike writes t the way raw, an example, is written.
func timeLike(raw string, t time.Time) string {
	if strings.HasPrefix(raw, `"`) {
		return quote(t.UTC().Format(time.RFC3339))
	}
	return strconv.FormatInt(t.Unix(), 10)
}

func titled(f string) string {
	if f == "" {
		return f
	}
	return strings.ToUpper(f[:1]) + f[1:]
}

// quote returns s as a JSON string, escaped by encoding/json.
func quote(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func abbrev(b []byte) string {
	if len(b) > 120 {
		return string(b[:120]) + "..."
	}
	return string(b)
}

// event is the top level of an example body, in order, values raw, so
// hostile variants can be written byte for byte.
type event []member

type member struct{ name, raw string }

func parseEvent(t testing.TB, body []byte) event {
	t.Helper()
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		t.Fatalf("Suite: Event is not a JSON object: %v", err)
	}
	var ev event
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			t.Fatalf("Suite: Event: %v", err)
		}
		n := name.String()
		v, err := dec.ReadValue()
		if err != nil {
			t.Fatalf("Suite: Event: %v", err)
		}
		ev = append(ev, member{n, string(v)})
	}
	return ev
}

func (ev event) get(name string) (string, bool) {
	for _, m := range ev {
		if m.name == name {
			return m.raw, true
		}
	}
	return "", false
}

// with returns ev with name set to raw, in place or appended.
func (ev event) with(name, raw string) event {
	out := slices.Clone(ev)
	for i := range out {
		if out[i].name == name {
			out[i].raw = raw
			return out
		}
	}
	return append(out, member{name, raw})
}

func (ev event) prepend(name, raw string) event {
	return append(event{{name, raw}}, ev...)
}

func (ev event) appendMember(name, raw string) event {
	return append(slices.Clone(ev), member{name, raw})
}

// json writes ev; names and raw values are copied byte for byte.
func (ev event) json() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ev {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(quote(m.name))
		b.WriteByte(':')
		b.WriteString(m.raw)
	}
	b.WriteByte('}')
	return b.Bytes()
}
