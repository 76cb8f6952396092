package receiver_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/groupcommit"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider/billete"
	"github.com/payhook/payhook/provider/providertest"
	"github.com/payhook/payhook/provider/standard"
	"github.com/payhook/payhook/provider/stripe"
	"github.com/payhook/payhook/receiver"
	"github.com/payhook/payhook/store"
	"github.com/payhook/payhook/store/storetest"
)

var (
	oldSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("old secret, being retired"))
	newSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("new secret after rotation"))
	// stripeSecret signs for the stripe-live source.
	stripeSecret = "whsec_stripe_live_endpoint"
)

type env struct {
	db  *store.DB
	url string // the receiver's base URL
}

// newEnv serves a receiver over loopback HTTP on the database at dbURL
// with two sources: billete-test, a billete source of environment test
// accepting the given secrets, and stripe-live, a stripe source of
// environment live accepting stripeSecret. Its queue does not process
// events.
func newEnv(t testing.TB, dbURL string, secrets ...string) *env {
	return newEnvProcessing(t, dbURL, nil, secrets...)
}

// newEnvProcessing is newEnv with a started queue running handlers.
func newEnvProcessing(t testing.TB, dbURL string, handlers *payhook.Mux, secrets ...string) *env {
	return newEnvWith(t, dbURL, handlers, false, secrets...)
}

// newEnvWith is newEnvProcessing, storing through a group committer when
// grouped is set.
func newEnvWith(t testing.TB, dbURL string, handlers *payhook.Mux, grouped bool, secrets ...string) *env {
	t.Helper()
	ctx := context.Background()
	db := storetest.Migrated(t, dbURL)
	if err := jobs.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	q, err := jobs.New(db, jobs.Config{Handlers: handlers, PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if handlers != nil {
		if err := q.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Stop(context.Background()) })
	}
	v, err := billete.New(billete.Config{Secrets: secrets})
	if err != nil {
		t.Fatal(err)
	}
	sv, err := stripe.New(stripe.Config{Secrets: []string{stripeSecret}})
	if err != nil {
		t.Fatal(err)
	}
	var inbox payhook.Inbox = q
	if grouped {
		c := groupcommit.New(q, groupcommit.Config{})
		t.Cleanup(c.Close)
		inbox = c
	}
	r, err := receiver.New(receiver.Config{
		Sources: []payhook.Source{
			{Name: "billete-test", Provider: "billete", Environment: "test", Verifier: v},
			{Name: "stripe-live", Provider: "stripe", Environment: "live", Verifier: sv},
		},
		Inbox:        inbox,
		MaxBodyBytes: 4096,
		Logger:       slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/webhooks/{source}", r)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{db: db, url: srv.URL}
}

func body(id, environment string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"checkout.completed","created_at":"2026-11-30T12:00:00Z","environment":%q,"api_version":"2026-01-01","data":{"id":"chk_1"}}`, id, environment)
}

// post delivers body to source signed with secret at time at, and returns
// the status and decoded answer.
func (e *env) post(t *testing.T, source string, b []byte, secret string, at time.Time) (int, map[string]any) {
	t.Helper()
	h := http.Header{}
	if secret != "" {
		var id struct{ ID string }
		json.Unmarshal(b, &id)
		var err error
		if h, err = standard.Sign(secret, id.ID, at, b); err != nil {
			t.Fatal(err)
		}
	}
	return e.do(t, http.MethodPost, "/webhooks/"+source, h, bytes.NewReader(b))
}

// postRetrying posts b signed with newSecret as a provider redelivers:
// signed anew at each try, and tried again while the answer is 503, which
// is right when a busy machine holds the row lock past the store's lock
// timeout. It returns the first other answer and the number of tries.
func (e *env) postRetrying(t *testing.T, source string, b []byte) (int, map[string]any, int) {
	t.Helper()
	for try := 1; ; try++ {
		status, answer := e.post(t, source, b, newSecret, time.Now())
		if status != http.StatusServiceUnavailable || try == 3000 {
			return status, answer, try
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stripeSigned returns the headers Stripe sends with b, signed with
// stripeSecret at time at.
func stripeSigned(b []byte, at time.Time) http.Header {
	ts := fmt.Sprint(at.Unix())
	h := http.Header{}
	h.Set(stripe.Header, "t="+ts+",v1="+providertest.HMACHex([]byte(stripeSecret), ts+"."+string(b)))
	return h
}

func (e *env) do(t *testing.T, method, path string, h http.Header, body io.Reader) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, body)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v", method, path, err)
	}
	return resp.StatusCode, answer
}

// counts returns how many events and processing jobs the database holds.
func (e *env) counts(t *testing.T) (events, jobs int) {
	t.Helper()
	if err := e.db.SQL.QueryRow(`SELECT COUNT(*) FROM payhook_events`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if err := e.db.SQL.QueryRow(`SELECT COUNT(*) FROM river_job WHERE kind = 'payhook_process_event'`).Scan(&jobs); err != nil {
		t.Fatal(err)
	}
	return events, jobs
}

func TestReceiverAnswers(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, newSecret)
		now := time.Now()
		garbled := func(b []byte) []byte { c := bytes.Clone(b); c[10] ^= 1; return c }
		signedWith := func(b []byte, mutate func(http.Header)) http.Header {
			h, _ := standard.Sign(newSecret, "evt_x", now, b)
			mutate(h)
			return h
		}
		for _, tc := range []struct {
			name       string
			method     string
			source     string
			header     http.Header
			body       []byte
			wantStatus int
			wantError  string
		}{
			{"missing signature", "POST", "billete-test", http.Header{}, body("evt_x", "test"), 400, "missing"},
			{"malformed signature", "POST", "billete-test",
				signedWith(body("evt_x", "test"), func(h http.Header) { h.Set("webhook-signature", "v1,%%%") }), body("evt_x", "test"), 400, "signature"},
			{"wrong signature", "POST", "billete-test",
				signedWith(body("evt_x", "test"), func(http.Header) {}), garbled(body("evt_x", "test")), 400, "signature"},
			{"expired timestamp", "POST", "billete-test", mustSign(t, newSecret, "evt_x", now.Add(-10*time.Minute), body("evt_x", "test")),
				body("evt_x", "test"), 400, "tolerance"},
			{"future timestamp", "POST", "billete-test", mustSign(t, newSecret, "evt_x", now.Add(10*time.Minute), body("evt_x", "test")),
				body("evt_x", "test"), 400, "future"},
			{"signed but not an object", "POST", "billete-test", mustSign(t, newSecret, "evt_x", now, []byte(`["evt_x"]`)),
				[]byte(`["evt_x"]`), 400, "malformed"},
			{"signed object without id", "POST", "billete-test", mustSign(t, newSecret, "evt_x", now, []byte(`{"type":"a.b"}`)),
				[]byte(`{"type":"a.b"}`), 400, "malformed"},
			{"unknown source", "POST", "nope", mustSign(t, newSecret, "evt_x", now, body("evt_x", "test")), body("evt_x", "test"), 404, "unknown source"},
			{"GET", "GET", "billete-test", http.Header{}, nil, 405, "not allowed"},
			{"PUT", "PUT", "billete-test", mustSign(t, newSecret, "evt_x", now, body("evt_x", "test")), body("evt_x", "test"), 405, "not allowed"},
			{"body over the limit", "POST", "billete-test", mustSign(t, newSecret, "evt_x", now, big()), big(), 413, "limit"},
			// Malformed before the store: such an id or type would fail
			// the insert (on PostgreSQL the index row is too large, NUL is
			// not text) and answer 503 to every retry, forever.
			{"event id over 255 bytes", "POST", "billete-test", mustSign(t, newSecret, longID, now, body(longID, "test")),
				body(longID, "test"), 400, "of 256 bytes is over the 255-byte limit"},
			{"huge event id", "POST", "billete-test", mustSign(t, newSecret, hugeID, now, body(hugeID, "test")),
				body(hugeID, "test"), 400, "of 3004 bytes"},
			{"event type over 255 bytes", "POST", "billete-test", mustSign(t, newSecret, "evt_x", now, withType("evt_x", longType)),
				withType("evt_x", longType), 400, "event type of 256 bytes"},
			{"event type with NUL", "POST", "billete-test", mustSign(t, newSecret, "evt_x", now, withType("evt_x", "a\\u0000b")),
				withType("evt_x", "a\\u0000b"), 400, "control or format characters"},
			{"event id with a control character", "POST", "stripe-live", stripeSigned(ctlID, now), ctlID, 400, "control or format characters"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, answer := e.do(t, tc.method, "/webhooks/"+tc.source, tc.header, bytes.NewReader(tc.body))
				msg, _ := answer["error"].(string)
				if status != tc.wantStatus || !strings.Contains(msg, tc.wantError) {
					t.Fatalf("status %d, error %q; want %d and an error mentioning %q", status, msg, tc.wantStatus, tc.wantError)
				}
				if ev, jobs := e.counts(t); ev != 0 || jobs != 0 {
					t.Fatalf("stored %d events and %d jobs, want nothing", ev, jobs)
				}
			})
		}
		t.Run("chunked body over the limit", func(t *testing.T) {
			// No Content-Length: the limit must hold while the body is read.
			status, _ := e.do(t, "POST", "/webhooks/billete-test", mustSign(t, newSecret, "evt_x", now, big()), io.MultiReader(bytes.NewReader(big())))
			if ev, _ := e.counts(t); status != 413 || ev != 0 {
				t.Fatalf("status %d with %d events, want 413 and none", status, ev)
			}
		})
	})
}

func mustSign(t *testing.T, secret, id string, at time.Time, b []byte) http.Header {
	t.Helper()
	h, err := standard.Sign(secret, id, at, b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var (
	longID   = "evt_" + strings.Repeat("i", receiver.MaxFieldBytes-3)
	hugeID   = "evt_" + incompressible(3000)
	longType = strings.Repeat("t", receiver.MaxFieldBytes+1)
	ctlID    = []byte(`{"id":"evt_\u0007bell","type":"charge.succeeded","livemode":true}`)
)

// incompressible returns n random letters: stored in an index, so many
// of them exceed PostgreSQL's index row size, as repetitions would not.
func incompressible(n int) string {
	r := rand.New(rand.NewChaCha8([32]byte{}))
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(r.IntN(26))
	}
	return string(b)
}

// withType is a billete event body with the given (JSON-escaped) type.
func withType(id, typ string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"type":"%s","created_at":"2026-11-30T12:00:00Z","environment":"test","data":{}}`, id, typ)
}

func TestLongestFieldsStored(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, newSecret)
		id := longID[:receiver.MaxFieldBytes]
		b := withType(id, longType[:receiver.MaxFieldBytes])
		status, answer := e.post(t, "billete-test", b, newSecret, time.Now())
		if status != 200 || answer["status"] != "stored" {
			t.Fatalf("id and type of %d bytes: %d %v, want 200 stored", receiver.MaxFieldBytes, status, answer)
		}
	})
}

func big() []byte {
	return body("evt_big"+strings.Repeat("x", 5000), "test")
}

func TestNewEventThenDuplicates(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, newSecret)
		status, answer := e.post(t, "billete-test", body("evt_1", "test"), newSecret, time.Now())
		if status != 200 || answer["status"] != "stored" {
			t.Fatalf("first delivery: %d %v, want 200 stored", status, answer)
		}
		if ev, jobs := e.counts(t); ev != 1 || jobs != 1 {
			t.Fatalf("after first delivery: %d events, %d jobs; want 1, 1", ev, jobs)
		}
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				status, answer, _ := e.postRetrying(t, "billete-test", body("evt_1", "test"))
				if status != 200 || answer["status"] != "duplicate" {
					t.Errorf("redelivery: %d %v, want 200 duplicate", status, answer)
				}
			})
		}
		wg.Wait()
		if ev, jobs := e.counts(t); ev != 1 || jobs != 1 {
			t.Fatalf("after 50 redeliveries: %d events, %d jobs; want 1, 1", ev, jobs)
		}
		evs, _ := e.db.ListEvents(context.Background(), store.Filter{})
		if got := evs[0]; got.EventID != "evt_1" || got.Type != "checkout.completed" || got.Environment != "test" ||
			!bytes.Equal(got.Payload, body("evt_1", "test")) || got.SecretID == "" || got.Status != payhook.StatusReceived {
			t.Fatalf("stored event = %+v", got)
		}
	})
}

func TestConcurrentFirstDeliveries(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		handlers := &payhook.Mux{}
		var applied atomic.Int32
		handlers.HandleFunc("checkout.completed", func(ctx context.Context, tx *sql.Tx, ev *payhook.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO effects (event_id) VALUES ($1)`, ev.EventID)
			applied.Add(1)
			return err
		})
		e := newEnvProcessing(t, dbURL, handlers, newSecret)
		if _, err := e.db.SQL.Exec(`CREATE TABLE effects (event_id TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		answers := map[string]int{}
		retried := 0
		for range 50 {
			wg.Go(func() {
				status, answer, tries := e.postRetrying(t, "billete-test", body("evt_burst", "test"))
				mu.Lock()
				retried += tries - 1
				answers[fmt.Sprintf("%d %v", status, answer["status"])]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if answers["200 stored"] != 1 || answers["200 duplicate"] != 49 {
			t.Fatalf("answers = %v (after %d answers 503), want one 200 stored and 49 200 duplicate", answers, retried)
		}
		if ev, jobs := e.counts(t); ev != 1 || jobs != 1 {
			t.Fatalf("%d events, %d jobs; want 1, 1", ev, jobs)
		}
		// Fail only when nothing moved (the event's attempts) for longer
		// than a loaded machine and a job's recovery (90 s) could take.
		for last, moved := -1, time.Now(); ; time.Sleep(10 * time.Millisecond) {
			evs, _ := e.db.ListEvents(context.Background(), store.Filter{})
			if evs[0].Status == payhook.StatusProcessed {
				break
			}
			if evs[0].Attempts != last {
				last, moved = evs[0].Attempts, time.Now()
			} else if time.Since(moved) > 3*time.Minute {
				t.Fatalf("event still %s, nothing moved for 3m (attempts %d, %q)", evs[0].Status, evs[0].Attempts, evs[0].LastError)
			}
		}
		var n int
		e.db.SQL.QueryRow(`SELECT COUNT(*) FROM effects`).Scan(&n)
		if n != 1 || applied.Load() != 1 {
			t.Fatalf("effect committed %d times, handler ran %d times; want 1 and 1", n, applied.Load())
		}
	})
}

func TestOtherEnvironmentIgnored(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, newSecret)
		status, answer := e.post(t, "billete-test", body("evt_live", "live"), newSecret, time.Now())
		if status != 200 || answer["status"] != "ignored" {
			t.Fatalf("live event on a test source: %d %v, want 200 ignored", status, answer)
		}
		if ev, jobs := e.counts(t); ev != 1 || jobs != 0 {
			t.Fatalf("%d events, %d jobs; want the event stored and no job", ev, jobs)
		}
		evs, _ := e.db.ListEvents(context.Background(), store.Filter{})
		if evs[0].Status != payhook.StatusIgnored || !strings.Contains(evs[0].LastError, "environment") {
			t.Fatalf("event = %s (%q), want ignored with the reason", evs[0].Status, evs[0].LastError)
		}
	})
}

func TestEnvironmentFailsClosed(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, newSecret)
		for _, tc := range []struct {
			name       string
			body       string
			wantStatus string
			wantReason string
		}{
			{"live event", `{"id":"evt_live","type":"charge.succeeded","livemode":true}`, "stored", ""},
			{"test event", `{"id":"evt_test","type":"charge.succeeded","livemode":false}`, "ignored",
				`event of environment "test" on a source of environment "live"`},
			{"event that does not say", `{"id":"evt_none","type":"charge.succeeded"}`, "ignored",
				`event does not say its environment, on a source of environment "live"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				b := []byte(tc.body)
				status, answer := e.do(t, "POST", "/webhooks/stripe-live", stripeSigned(b, time.Now()), bytes.NewReader(b))
				if status != 200 || answer["status"] != tc.wantStatus || (tc.wantReason != "" && answer["reason"] != tc.wantReason) {
					t.Fatalf("%d %v; want 200 %s %q", status, answer, tc.wantStatus, tc.wantReason)
				}
				var id struct{ ID string }
				json.Unmarshal(b, &id)
				evs, err := e.db.ListEvents(context.Background(), store.Filter{EventID: id.ID})
				if err != nil || len(evs) != 1 {
					t.Fatalf("ListEvents = %v, %v; want the event", evs, err)
				}
				wantStatus := payhook.StatusReceived
				if tc.wantStatus == "ignored" {
					wantStatus = payhook.StatusIgnored
				}
				if evs[0].Status != wantStatus || evs[0].LastError != tc.wantReason {
					t.Fatalf("stored %s (%q); want %s (%q)", evs[0].Status, evs[0].LastError, wantStatus, tc.wantReason)
				}
			})
		}
		if ev, jobs := e.counts(t); ev != 3 || jobs != 1 {
			t.Fatalf("%d events, %d jobs; want 3 stored and a job for the live one only", ev, jobs)
		}
		// The two ignored ones are not silent: the source's alert counts them.
		var count int
		var msg string
		if err := e.db.SQL.QueryRow(`SELECT count, message FROM payhook_alerts WHERE kind = $1 AND subject = $2`,
			store.AlertEnvironmentMismatch, "stripe-live").Scan(&count, &msg); err != nil || count != 2 || !strings.Contains(msg, "evt_none") {
			t.Fatalf("environment alert: count %d, message %q, %v; want 2, naming the latest event", count, msg, err)
		}
	})
}

func TestSecretRotation(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, oldSecret, newSecret)
		for i, secret := range []string{oldSecret, newSecret} {
			status, answer := e.post(t, "billete-test", body(fmt.Sprint("evt_rot", i), "test"), secret, time.Now())
			if status != 200 || answer["status"] != "stored" {
				t.Fatalf("secret %d during rotation: %d %v, want 200 stored", i, status, answer)
			}
		}
		evs, _ := e.db.ListEvents(context.Background(), store.Filter{})
		if evs[0].SecretID == evs[1].SecretID || strings.Contains(evs[0].SecretID+evs[1].SecretID, "secret") {
			t.Fatalf("secret ids %q and %q: want two distinct fingerprints, never the secret", evs[0].SecretID, evs[1].SecretID)
		}

		// The same database (this engine's), behind a receiver that no
		// longer has the old secret.
		retired := newEnv(t, dbURL, newSecret)
		if status, _ := retired.post(t, "billete-test", body("evt_rot_old", "test"), oldSecret, time.Now()); status != 400 {
			t.Fatalf("removed secret: status %d, want 400", status)
		}
		if status, _ := retired.post(t, "billete-test", body("evt_rot_new", "test"), newSecret, time.Now()); status != 200 {
			t.Fatalf("kept secret: status %d, want 200", status)
		}
	})
}

func TestDatabaseDown(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		e := newEnv(t, dbURL, newSecret)
		// The enqueue fails after the event's insert: the commit must not
		// happen and nothing may remain of the event.
		if _, err := e.db.SQL.Exec(`ALTER TABLE river_job RENAME TO river_job_away`); err != nil {
			t.Fatal(err)
		}
		status, answer := e.post(t, "billete-test", body("evt_down", "test"), newSecret, time.Now())
		if status != 503 || answer["error"] == "" {
			t.Fatalf("enqueue failing: %d %v, want 503 with an error", status, answer)
		}
		if _, err := e.db.SQL.Exec(`ALTER TABLE river_job_away RENAME TO river_job`); err != nil {
			t.Fatal(err)
		}
		if ev, jobs := e.counts(t); ev != 0 || jobs != 0 {
			t.Fatalf("half-written: %d events, %d jobs", ev, jobs)
		}
		// The provider retries once the database is back.
		if status, _ := e.post(t, "billete-test", body("evt_down", "test"), newSecret, time.Now()); status != 200 {
			t.Fatalf("retry after recovery: %d, want 200", status)
		}
		e.db.SQL.Close()
		if status, _ := e.post(t, "billete-test", body("evt_down2", "test"), newSecret, time.Now()); status != 503 {
			t.Fatalf("database closed: %d, want 503", status)
		}
	})
}

// TestNewRefusesBadSources: New refuses, with an error wrapping
// payhook.ErrConfig, a source no delivery could be processed through: no
// name or verifier, a name twice, or an environment no event says (every
// event would be stored as ignored).
func TestNewRefusesBadSources(t *testing.T) {
	t.Parallel()
	v, err := stripe.New(stripe.Config{Secrets: []string{"whsec_test"}})
	if err != nil {
		t.Fatal(err)
	}
	var inbox noInbox // never called
	for name, sources := range map[string][]payhook.Source{
		"no name":     {{Provider: "stripe", Verifier: v}},
		"no verifier": {{Name: "shop", Provider: "stripe"}},
		"twice":       {{Name: "shop", Provider: "stripe", Verifier: v}, {Name: "shop", Provider: "stripe", Verifier: v}},
		"production":  {{Name: "shop", Provider: "stripe", Environment: "production", Verifier: v}},
		"Live":        {{Name: "shop", Provider: "stripe", Environment: "Live", Verifier: v}},
	} {
		if _, err := receiver.New(receiver.Config{Inbox: inbox, Sources: sources}); !errors.Is(err, payhook.ErrConfig) {
			t.Errorf("%s: New = %v, want an error wrapping payhook.ErrConfig", name, err)
		}
	}
	for _, env := range []string{"", "test", "live"} {
		src := payhook.Source{Name: "shop", Provider: "stripe", Environment: env, Verifier: v}
		if _, err := receiver.New(receiver.Config{Inbox: inbox, Sources: []payhook.Source{src}}); err != nil {
			t.Errorf("environment %q: New = %v", env, err)
		}
	}
}

// noInbox is an Inbox for a receiver that stores nothing.
type noInbox struct{}

func (noInbox) Ingest(context.Context, []*payhook.Event) ([]bool, error) {
	return nil, payhook.ErrUnavailable
}
