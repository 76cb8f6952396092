package signing_test

import (
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/signing"
)

// Known answers computed with Python:
//
//	"sha256:" + hashlib.sha256(b"whsec_abc").hexdigest()[:12]
//	hmac.new(b"key", b"The quick brown fox jumps over the lazy dog", hashlib.sha256).hexdigest()
func TestKnownAnswers(t *testing.T) {
	t.Parallel()
	if got, want := signing.Fingerprint("whsec_abc"), "sha256:e1ac16da4cac"; got != want {
		t.Errorf("Fingerprint = %q; want %q", got, want)
	}
	mac := signing.HMACSHA256([]byte("key"), []byte("The quick brown "), []byte("fox jumps over the lazy dog"))
	if got, want := hex.EncodeToString(mac), "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"; got != want {
		t.Errorf("HMACSHA256 = %s; want %s", got, want)
	}
}

func TestParseSecrets(t *testing.T) {
	t.Parallel()
	got, err := signing.ParseSecrets([]string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []signing.Secret{{ID: signing.Fingerprint("a"), Key: []byte("a")}, {ID: signing.Fingerprint("b"), Key: []byte("b")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSecrets = %v; want %v", got, want)
	}
	for _, raw := range [][]string{nil, {}, {""}, {"a", ""}} {
		if _, err := signing.ParseSecrets(raw); !errors.Is(err, payhook.ErrConfig) {
			t.Errorf("ParseSecrets(%q) = %v; want ErrConfig", raw, err)
		}
	}
}

func TestMatchHMAC(t *testing.T) {
	t.Parallel()
	secrets, _ := signing.ParseSecrets([]string{"old", "new"})
	msg := []byte("msg")
	sigNew := signing.HMACSHA256([]byte("new"), msg)
	other := signing.HMACSHA256([]byte("other"), msg)
	tests := []struct {
		name       string
		candidates [][]byte
		wantID     string
		wantOK     bool
	}{
		{"new", [][]byte{sigNew}, signing.Fingerprint("new"), true},
		{"among others", [][]byte{other, sigNew}, signing.Fingerprint("new"), true},
		{"truncated", [][]byte{sigNew[:16]}, "", false},
		{"none", [][]byte{other}, "", false},
		{"empty", nil, "", false},
	}
	for _, tc := range tests {
		s, ok := signing.MatchHMAC(secrets, msg, tc.candidates)
		if ok != tc.wantOK || s.ID != tc.wantID {
			t.Errorf("MatchHMAC(%s) = %q, %v; want %q, %v", tc.name, s.ID, ok, tc.wantID, tc.wantOK)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		decode  func(string) ([]byte, error)
		in      string
		want    string
		wantErr bool
	}{
		{"hex", signing.DecodeHex, "00ff", "\x00\xff", false},
		{"hex upper", signing.DecodeHex, "00FF", "\x00\xff", false},
		{"hex odd", signing.DecodeHex, "0ff", "", true},
		{"hex junk", signing.DecodeHex, "zz", "", true},
		{"hex empty", signing.DecodeHex, "", "", true},
		{"base64", signing.DecodeBase64, "AP8=", "\x00\xff", false},
		{"base64 unpadded", signing.DecodeBase64, "AP8", "\x00\xff", false},
		{"base64 url alphabet", signing.DecodeBase64, "_-8=", "", true},
		{"base64 junk", signing.DecodeBase64, "!!", "", true},
		{"base64 empty", signing.DecodeBase64, "", "", true},
	}
	for _, tc := range tests {
		got, err := tc.decode(tc.in)
		if tc.wantErr {
			if !errors.Is(err, payhook.ErrSignature) {
				t.Errorf("%s(%q) = %v; want ErrSignature", tc.name, tc.in, err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("%s(%q) = %x, %v; want %x", tc.name, tc.in, got, err, tc.want)
		}
	}
}

func TestCheckTimestamp(t *testing.T) {
	t.Parallel()
	ts := time.Unix(1700000000, 0)
	tests := []struct {
		name     string
		received time.Time
		tol      time.Duration
		want     string
	}{
		{"same", ts, 5 * time.Minute, ""},
		{"at the edge", ts.Add(5 * time.Minute), 5 * time.Minute, ""},
		{"at the future edge", ts.Add(-5 * time.Minute), 5 * time.Minute, ""},
		{"old", ts.Add(12 * time.Minute), 5 * time.Minute, "timestamp 1700000000 is 12m0s old, beyond the 5m0s tolerance: invalid signature"},
		{"future", ts.Add(-12 * time.Minute), 5 * time.Minute, "timestamp 1700000000 is 12m0s in the future, beyond the 5m0s tolerance: invalid signature"},
		{"wide tolerance", ts.Add(12 * time.Minute), time.Hour, ""},
		{"no receive time", time.Time{}, time.Hour, "delivery has no receive time to check timestamp 1700000000 against: invalid signature"},
		{"huge tolerance", ts.Add(100 * 365 * 24 * time.Hour), math.MaxInt64, ""},
		{"far too old", ts.Add(100 * 365 * 24 * time.Hour), 5 * time.Minute, "timestamp 1700000000 is 876000h0m0s old, beyond the 5m0s tolerance: invalid signature"},
	}
	for _, tc := range tests {
		err := signing.CheckTimestamp(ts, tc.received, tc.tol)
		got := ""
		if err != nil {
			got = err.Error()
			if !errors.Is(err, payhook.ErrSignature) {
				t.Errorf("CheckTimestamp(%s) = %v; does not wrap ErrSignature", tc.name, err)
			}
		}
		if got != tc.want {
			t.Errorf("CheckTimestamp(%s) = %q; want %q", tc.name, got, tc.want)
		}
	}
}

// TestCheckTimestampOverflow: a timestamp more than ~292 years away from
// the receipt time overflows a time.Duration; it must still be refused,
// whatever the tolerance.
func TestCheckTimestampOverflow(t *testing.T) {
	t.Parallel()
	received := time.Date(2026, 1, 15, 10, 0, 0, 0, time.UTC)
	for _, ts := range []time.Time{
		time.Unix(1_001_796_109_157, 0),    // the case, year ~31700
		time.Unix(received.UnixMilli(), 0), // milliseconds read as seconds
		time.Unix(1<<62, 0),
		time.Unix(-1<<62, 0),
		time.Unix(-1, 0),
		{},
	} {
		for _, tol := range []time.Duration{5 * time.Minute, math.MaxInt64} {
			if err := signing.CheckTimestamp(ts, received, tol); !errors.Is(err, payhook.ErrSignature) {
				t.Errorf("CheckTimestamp(%d, tolerance %v) = %v; want ErrSignature", ts.Unix(), tol, err)
			}
		}
	}
}

func TestTolerance(t *testing.T) {
	t.Parallel()
	if got, err := signing.Tolerance(0); got != 5*time.Minute || err != nil {
		t.Errorf("Tolerance(0) = %v, %v; want 5m0s", got, err)
	}
	if got, err := signing.Tolerance(time.Second); got != time.Second || err != nil {
		t.Errorf("Tolerance(1s) = %v, %v; want 1s", got, err)
	}
	if _, err := signing.Tolerance(-time.Second); !errors.Is(err, payhook.ErrConfig) {
		t.Errorf("Tolerance(-1s) = %v; want ErrConfig", err)
	}
}

func TestParseUnix(t *testing.T) {
	t.Parallel()
	if got, err := signing.ParseUnix(" 1700000000"); err != nil || !got.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("ParseUnix = %v, %v", got, err)
	}
	for _, in := range []string{"", "1.5", "2023-11-14T22:13:20Z", "1e9",
		"1001796109157", "1768470000000", "946684799", "7258118401", "-1", "0", "99999999999999999999"} {
		if _, err := signing.ParseUnix(in); !errors.Is(err, payhook.ErrSignature) {
			t.Errorf("ParseUnix(%q) = %v; want ErrSignature", in, err)
		}
	}
}

func TestParams(t *testing.T) {
	t.Parallel()
	got, err := signing.Params("t=1, v1=a,v1=b,,v0=c", ",")
	want := map[string][]string{"t": {"1"}, "v1": {"a", "b"}, "v0": {"c"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Params = %v, %v; want %v", got, err, want)
	}
	for _, in := range []string{"", "  ", "t=1,v1"} {
		if _, err := signing.Params(in, ","); !errors.Is(err, payhook.ErrSignature) {
			t.Errorf("Params(%q) = %v; want ErrSignature", in, err)
		}
	}
}

func TestObject(t *testing.T) {
	t.Parallel()
	for _, body := range []string{"", "[]", `"x"`, "null", "1", "{", `{"a":1} x`} {
		if _, err := signing.ParseObject([]byte(body)); !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("ParseObject(%q) = %v; want ErrMalformed", body, err)
		}
	}
	o, err := signing.ParseObject([]byte(` {"s":"x","e":"","n":42,"f":1.5,"b":true,"z":null,"u":1700000000,"r":"2023-11-14T22:13:20+01:00"}`))
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any, err error, wantErr bool) {
		t.Helper()
		if wantErr {
			if !errors.Is(err, payhook.ErrMalformed) {
				t.Errorf("%s: err = %v; want ErrMalformed", name, err)
			}
			return
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	s, err := o.String("s")
	check(`String("s")`, s, "x", err, false)
	s, err = o.String("missing")
	check(`String("missing")`, s, "", err, false)
	_, err = o.String("n")
	check(`String("n")`, nil, nil, err, true)
	_, err = o.RequiredString("e")
	check(`RequiredString("e")`, nil, nil, err, true)
	_, err = o.RequiredString("z")
	check(`RequiredString("z")`, nil, nil, err, true)
	s, err = o.ID("n")
	check(`ID("n")`, s, "42", err, false)
	s, err = o.ID("s")
	check(`ID("s")`, s, "x", err, false)
	_, err = o.ID("f")
	check(`ID("f")`, nil, nil, err, true)
	_, err = o.ID("b")
	check(`ID("b")`, nil, nil, err, true)
	_, err = o.ID("missing")
	check(`ID("missing")`, nil, nil, err, true)
	b, ok, err := o.Bool("b")
	check(`Bool("b")`, []bool{b, ok}, []bool{true, true}, err, false)
	b, ok, err = o.Bool("missing")
	check(`Bool("missing")`, []bool{b, ok}, []bool{false, false}, err, false)
	_, _, err = o.Bool("s")
	check(`Bool("s")`, nil, nil, err, true)
	tm, err := o.UnixTime("u")
	check(`UnixTime("u")`, tm, time.Unix(1700000000, 0).UTC(), err, false)
	_, err = o.UnixTime("r")
	check(`UnixTime("r")`, nil, nil, err, true)
	tm, err = o.RFC3339Time("r")
	check(`RFC3339Time("r")`, tm, time.Date(2023, 11, 14, 21, 13, 20, 0, time.UTC), err, false)
	_, err = o.RFC3339Time("s")
	check(`RFC3339Time("s")`, nil, nil, err, true)
	tm, err = o.Time("u")
	check(`Time("u")`, tm, time.Unix(1700000000, 0).UTC(), err, false)
	tm, err = o.Time("r")
	check(`Time("r")`, tm, time.Date(2023, 11, 14, 21, 13, 20, 0, time.UTC), err, false)
	tm, err = o.Time("z")
	check(`Time("z")`, tm, time.Time{}, err, false)
}

// TestKeyValueHeader uses Paddle's scheme and a vector computed with
// Python, independently of this package:
//
//	hmac.new(b"pdl_ntfset_01hpayhook_TestSecretKey", b"1700000000:" + body, hashlib.sha256).hexdigest()
func TestKeyValueHeader(t *testing.T) {
	t.Parallel()
	const (
		body = `{"event_id":"evt_01hv8x2payhook","event_type":"transaction.completed","occurred_at":"2023-11-14T22:13:10.123456Z","notification_id":"ntf_01","data":{"id":"txn_01"}}`
		key  = "pdl_ntfset_01hpayhook_TestSecretKey"
		sig  = "4a589193d4ea99dabc2191aebfb9721b12bacb7d6c50035e4a71a2f6fa929dc7"
	)
	scheme := signing.KeyValueHeader{Header: "X-Sig", Sep: ";", TimestampKey: "ts", SignatureKey: "h1", Joiner: ':'}
	secrets, _ := signing.ParseSecrets([]string{"other", key})
	at := time.Unix(1700000000, 0)
	tests := []struct {
		header   string
		received time.Time
		want     string // the error, or "" for the fingerprint of key
	}{
		{"ts=1700000000;h1=" + sig, at, ""},
		{" h1=00ff ; ts=1700000000 ; h1=" + sig + "; v0=x", at.Add(-time.Minute), ""},
		{"", at, "missing X-Sig header: invalid signature"},
		{"ts=1700000000;h1", at, `malformed X-Sig header: entry "h1" is not key=value: invalid signature`},
		{"h1=" + sig, at, "X-Sig header needs exactly one ts=: invalid signature"},
		{"ts=1;ts=1700000000;h1=" + sig, at, "X-Sig header needs exactly one ts=: invalid signature"},
		{"ts=soon;h1=" + sig, at, `timestamp "soon" is not unix seconds: invalid signature`},
		{"ts=1700000000;v1=" + sig, at, "X-Sig header has no h1 signature: invalid signature"},
		{"ts=1700000000;h1=xyz", at, "h1: "},
		{"ts=1700000001;h1=" + sig, at, "no h1 signature matches: invalid signature"},
		{"ts=1700000000,h1=" + sig, at, `timestamp "1700000000,h1=`},
		{"ts=1700000000;h1=" + sig, at.Add(6 * time.Minute), "timestamp 1700000000 is 6m0s old, beyond the 5m0s tolerance: invalid signature"},
	}
	for _, tc := range tests {
		h := http.Header{}
		if tc.header != "" {
			h.Set("x-sig", tc.header)
		}
		got, err := scheme.Verify(payhook.Delivery{Header: h, Body: []byte(body), ReceivedAt: tc.received}, secrets, 5*time.Minute)
		if tc.want == "" {
			if err != nil || got.ID != signing.Fingerprint(key) {
				t.Errorf("Verify(%q) = %q, %v; want %q", tc.header, got.ID, err, signing.Fingerprint(key))
			}
			continue
		}
		if !errors.Is(err, payhook.ErrSignature) || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Verify(%q) = %v; want an ErrSignature starting %q", tc.header, err, tc.want)
		}
	}
}

// TestParseObjectStrict: signed bytes that two JSON readers could read
// as different events are refused, anywhere in the body.
func TestParseObjectStrict(t *testing.T) {
	t.Parallel()
	tests := []struct {
		body string
		want string // the error's text, or "" for any ErrMalformed
	}{
		{`{"id":"evt_a","id":"evt_b"}`, `body is not strict JSON: jsontext: duplicate object member name "id": malformed event`},
		{`{"data":{"object":{"amount":1,"amount":2}}}`, ""},
		{`{"data":[{"x":1},{"x":1,"x":1}]}`, ""},
		{"{\"id\":\"evt_\xff\"}", ""},
		{"{\"id\":\"evt_\xed\xa0\x80\"}", ""}, // a surrogate encoded in UTF-8
		{`{"id":"evt_\ud800"}`, `body is not strict JSON: jsontext: invalid surrogate pair ` + "`" + `\ud800"}` + "`" + ` in string within "/id" after offset 11: malformed event`},
		{`{"note":"\udc00\ud800"}`, ""},
		{`{"note":"\ud83dx"}`, ""},
		{"{\"\xff\":1}", ""},
		{`{"a":1} {"a":2}`, "body has data after its JSON object: malformed event"},
		{`{"a":1} 2`, "body has data after its JSON object: malformed event"},
		{`{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, ""},
		{`{"` + strings.Repeat("k", 1000) + `":1,"` + strings.Repeat("k", 1000) + `":2}`, ""},
	}
	for _, tc := range tests {
		_, err := signing.ParseObject([]byte(tc.body))
		if !errors.Is(err, payhook.ErrMalformed) || (tc.want != "" && err.Error() != tc.want) {
			t.Errorf("ParseObject(%.60q) = %v; want ErrMalformed %q", tc.body, err, tc.want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("ParseObject(%.60q) error is %d bytes long", tc.body, len(err.Error()))
		}
	}
	// Valid surrogate pairs and escapes are fine.
	o, err := signing.ParseObject([]byte(`{"id":"evt_\ud83d\ude00\u00e9","ok":"\n"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := o.String("id"); got != "evt_😀é" {
		t.Errorf(`String("id") = %q; want "evt_😀é"`, got)
	}
}

// TestCaseVariants: a field payhook reads is refused beside a name that
// differs only in case, which encoding/json would match instead.
func TestCaseVariants(t *testing.T) {
	t.Parallel()
	o, err := signing.ParseObject([]byte(`{"id":"evt_a","ID":"evt_b","Type":"x","livemode":true,"LIVEMODE":false,` +
		`"created":1700000000,"cReAtEd":1,"data":{"object":{"amount":1,"Amount":2,"Id":"x"}},"kelvin":1,"\u212aelvin":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.RequiredString("id"); err == nil || err.Error() != `field "id" appears also as "ID": malformed event` {
		t.Errorf(`RequiredString("id") = %v`, err)
	}
	if _, err := o.ID("ID"); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf(`ID("ID") = %v; want ErrMalformed`, err)
	}
	// Absent under its own name, present under another case: refused.
	if _, err := o.String("type"); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf(`String("type") = %v; want ErrMalformed`, err)
	}
	if _, _, err := o.Bool("livemode"); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf(`Bool("livemode") = %v; want ErrMalformed`, err)
	}
	if _, err := o.UnixTime("created"); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf(`UnixTime("created") = %v; want ErrMalformed`, err)
	}
	if _, err := o.Has("kelvin"); !errors.Is(err, payhook.ErrMalformed) { // U+212A KELVIN SIGN folds to k
		t.Errorf(`Has("kelvin") = %v; want ErrMalformed`, err)
	}
	data, err := o.Object("data")
	if err != nil {
		t.Fatal(err)
	}
	obj, err := data.Object("object")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obj.ID("amount"); err == nil || err.Error() != `field "data.object.amount" appears also as "Amount": malformed event` {
		t.Errorf(`ID("data.object.amount") = %v`, err)
	}
	// Other fields of the object are read as usual.
	if _, err := obj.String("id"); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf(`String("data.object.id") = %v; want ErrMalformed`, err)
	}
	if _, err := o.Object("kelvin"); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf(`Object("kelvin") = %v; want ErrMalformed`, err)
	}
	if _, err := obj.Object("missing"); err != nil {
		t.Errorf(`Object("missing") = %v; want an empty object`, err)
	}
	at, err := signing.ObjectAt([]byte(`{"data":{"object":{"id":"pi_1"}}}`), "data", "object")
	if id, _ := at.String("id"); err != nil || id != "pi_1" {
		t.Errorf(`ObjectAt(data.object).String("id") = %q, %v; want pi_1`, id, err)
	}
	for _, body := range []string{`{"data":{"object":{"id":"a","ID":"b"}}}`, `{"data":{"Object":{}}}`, `{"data":[]}`, `[]`} {
		at, err := signing.ObjectAt([]byte(body), "data", "object")
		if err == nil {
			_, err = at.String("id")
		}
		if !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("ObjectAt(%s).String(\"id\") = %v; want ErrMalformed", body, err)
		}
	}
}

// TestObjectReaders: the readers the billing mappings use beside the
// envelope's: kinds, number literals, arrays of objects, paths.
func TestObjectReaders(t *testing.T) {
	t.Parallel()
	o, err := signing.ParseObject([]byte(`{"s":"x","n":-0,"big":1e3,"b":false,"z":null,"o":{"k":1},` +
		`"list":[{"id":"a"},{"id":"b","ID":"c"}],"empty":[],"mixed":[{},2],"kind":1,"Kind":2}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field string
		want  byte
	}{{"s", '"'}, {"n", '0'}, {"b", 'f'}, {"z", 0}, {"missing", 0}, {"o", '{'}, {"list", '['}} {
		if got, err := o.Kind(tc.field); err != nil || byte(got) != tc.want {
			t.Errorf("Kind(%q) = %q, %v; want %q", tc.field, got, err, tc.want)
		}
	}
	if _, err := o.Kind("kind"); !errors.Is(err, payhook.ErrMalformed) {
		t.Errorf(`Kind("kind") = %v; want ErrMalformed (a case variant)`, err)
	}
	for field, want := range map[string]string{"n": "-0", "big": "1e3", "z": "", "missing": ""} {
		if got, err := o.Number(field); err != nil || got != want {
			t.Errorf("Number(%q) = %q, %v; want %q", field, got, err, want)
		}
	}
	if _, err := o.Number("s"); err == nil || err.Error() != `field "s" is not a number: malformed event` {
		t.Errorf(`Number("s") = %v`, err)
	}
	list, err := o.Objects("list")
	if err != nil || len(list) != 2 {
		t.Fatalf(`Objects("list") = %v, %v; want 2 objects`, list, err)
	}
	if id, err := list[0].String("id"); err != nil || id != "a" {
		t.Errorf(`list[0].String("id") = %q, %v; want "a"`, id, err)
	}
	if _, err := list[1].String("id"); err == nil || err.Error() != `field "list[1].id" appears also as "ID": malformed event` {
		t.Errorf(`list[1].String("id") = %v`, err)
	}
	if got := list[1].Path("id"); got != "list[1].id" {
		t.Errorf(`list[1].Path("id") = %q`, got)
	}
	if inner, _ := o.Object("o"); inner.Path("k") != "o.k" {
		t.Errorf(`Object("o").Path("k") = %q; want "o.k"`, inner.Path("k"))
	}
	// Escaped names are read by their text.
	esc, err := signing.ParseObject([]byte(`{"\u0069d":"x","t\u0079pe":"a","\u0054ype":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	if id, err := esc.String("id"); err != nil || id != "x" {
		t.Errorf(`String("id") of an escaped name = %q, %v; want "x"`, id, err)
	}
	if _, err := esc.String("type"); err == nil || err.Error() != `field "type" appears also as "Type": malformed event` {
		t.Errorf(`String("type") beside an escaped "Type" = %v`, err)
	}
	for _, field := range []string{"empty", "z", "missing"} {
		if got, err := o.Objects(field); err != nil || len(got) != 0 {
			t.Errorf("Objects(%q) = %v, %v; want none", field, got, err)
		}
	}
	for field, want := range map[string]string{
		"mixed": `field "mixed[1]" is not an object: malformed event`,
		"o":     `field "o" is not an array: malformed event`,
		"kind":  `field "kind" appears also as "Kind": malformed event`,
	} {
		if _, err := o.Objects(field); err == nil || err.Error() != want {
			t.Errorf("Objects(%q) = %v; want %q", field, err, want)
		}
	}
}

func TestObjectTimes(t *testing.T) {
	t.Parallel()
	o, err := signing.ParseObject([]byte(`{"min":946684800,"max":7258118400,"ms":1700000000000,"big":10000000000000,` +
		`"neg":-1,"huge":99999999999999999999,"float":1.7e9,"zero":"0001-01-01T00:00:00Z","rmin":"2000-01-01T00:00:00Z",` +
		`"rmax":"2200-01-01T00:00:00Z","late":"2200-01-01T00:00:00.000000001Z","early":"1999-12-31T23:59:59+00:00",` +
		`"far":"9999-12-31T23:59:59Z","offset":"2200-01-01T00:30:00+01:00"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"min", "max", "rmin", "rmax", "offset"} {
		if _, err := o.Time(f); err != nil {
			t.Errorf("Time(%q) = %v; want nil", f, err)
		}
	}
	for _, f := range []string{"ms", "big", "neg", "huge", "float", "zero", "late", "early", "far"} {
		if tm, err := o.Time(f); !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("Time(%q) = %v, %v; want ErrMalformed", f, tm, err)
		}
	}
	if _, err := o.UnixTime("big"); err == nil || err.Error() != `field "big" 10000000000000 is not unix seconds within 2000–2200: malformed event` {
		t.Errorf(`UnixTime("big") = %v`, err)
	}
}

func TestCheckEnvelope(t *testing.T) {
	t.Parallel()
	ok := payhook.Envelope{EventID: "evt_1", Type: "a.b", Environment: "live", OccurredAt: time.Unix(1700000000, 0)}
	if err := signing.CheckEnvelope(ok); err != nil {
		t.Errorf("CheckEnvelope(%+v) = %v", ok, err)
	}
	if err := signing.CheckEnvelope(payhook.Envelope{EventID: "1"}); err != nil {
		t.Errorf("CheckEnvelope(id only) = %v", err)
	}
	for _, env := range []payhook.Envelope{
		{},
		{EventID: "evt\u2028"}, {EventID: "evt\u202e"}, {EventID: "evt\x00"}, {EventID: "evt\ufffd"}, {EventID: "\xff"},
		{EventID: strings.Repeat("e", payhook.MaxRefBytes+1)},
		{EventID: "e", Type: "t\u200b"}, {EventID: "e", Environment: "live\n"},
		{EventID: "e", OccurredAt: payhook.MaxTime.Add(time.Second)}, {EventID: "e", OccurredAt: time.Unix(-1, 0)},
	} {
		if err := signing.CheckEnvelope(env); !errors.Is(err, payhook.ErrMalformed) {
			t.Errorf("CheckEnvelope(%+q) = %v; want ErrMalformed", env, err)
		}
	}
}

// BenchmarkEnvelope reads the envelope fields of a Stripe event of about
// 1.5 KB, as every delivery does.
func BenchmarkEnvelope(b *testing.B) {
	body := []byte(`{"id":"evt_1PayHookBench","object":"event","api_version":"2024-06-20","created":1768470000,` +
		`"data":{"object":{"id":"pi_3PayHook","object":"payment_intent","amount":2000,"amount_received":2000,` +
		`"currency":"usd","customer":"cus_Q1","description":"Order 1234","metadata":{"order_id":"ord_1234","note":"` +
		strings.Repeat("x", 900) + `"},"payment_method_types":["card"],"status":"succeeded","livemode":true}},` +
		`"livemode":true,"pending_webhooks":1,"request":{"id":"req_1","idempotency_key":"k1"},"type":"payment_intent.succeeded"}`)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		o, err := signing.ParseObject(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := o.RequiredString("id"); err != nil {
			b.Fatal(err)
		}
		if _, err := o.RequiredString("type"); err != nil {
			b.Fatal(err)
		}
		if _, err := o.UnixTime("created"); err != nil {
			b.Fatal(err)
		}
		if _, _, err := o.Bool("livemode"); err != nil {
			b.Fatal(err)
		}
	}
}
