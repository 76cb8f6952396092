package outbox_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/internal/dbtest"
	"github.com/payhook/payhook/outbox"
)

// mailbox is a real SMTP server (go-smtp) on loopback that offers
// STARTTLS and AUTH PLAIN and keeps what it receives.
type mailbox struct {
	addr string
	pool *x509.CertPool
	mu   sync.Mutex
	mail []string
	// rcpts are the recipients of each message.
	rcpts  [][]string
	authed int
}

func newMailbox(t *testing.T) *mailbox {
	t.Helper()
	// httptest's certificate is valid for 127.0.0.1.
	tlsSrv := httptest.NewTLSServer(nil)
	tlsSrv.Close()
	mb := &mailbox{pool: x509.NewCertPool()}
	mb.pool.AddCert(tlsSrv.Certificate())
	srv := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &session{mb: mb}, nil }))
	srv.Domain = "127.0.0.1"
	srv.TLSConfig = tlsSrv.TLS.Clone()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mb.addr = ln.Addr().String()
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return mb
}

type session struct {
	mb    *mailbox
	authd bool
	to    []string
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != "payhook" || pass != "s3cret" {
			return errors.New("bad credentials")
		}
		s.authd = true
		s.mb.mu.Lock()
		s.mb.authed++
		s.mb.mu.Unlock()
		return nil
	}), nil
}

func (s *session) Mail(string, *smtp.MailOptions) error {
	if !s.authd {
		return &smtp.SMTPError{Code: 530, Message: "authenticate first"}
	}
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mb.mu.Lock()
	defer s.mb.mu.Unlock()
	s.mb.mail = append(s.mb.mail, string(b))
	s.mb.rcpts = append(s.mb.rcpts, s.to)
	return nil
}

func (s *session) Reset()        { s.to = nil }
func (s *session) Logout() error { return nil }

func (mb *mailbox) messages() []string {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return append([]string(nil), mb.mail...)
}

// TestSMTPSink: each fact the sink takes is one plain-text mail over
// STARTTLS with AUTH PLAIN, its subject naming the fact and its subject,
// to every recipient.
func TestSMTPSink(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		db := open(t, dbURL)
		box := newOutbox(t, db)
		mb := newMailbox(t)
		sink, err := outbox.NewSMTP(outbox.SMTPConfig{Addr: mb.addr, Username: "payhook", Password: "s3cret",
			StartTLS: true, TLS: tlsRoots(mb.pool), From: "payhook@example.com",
			To: []string{"finance@example.com", "Ops <ops@example.com>"}, AllowPrivate: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := box.Add("finance", []string{"order.paid"}, sink); err != nil {
			t.Fatal(err)
		}
		q := queue(t, db, box, nil)
		for i := range 3 {
			if _, err := q.Ingest(ctx, []*payhook.Event{checkout(fmt.Sprintf("evt_m%d", i), fmt.Sprintf("pi_m%d", i),
				fmt.Sprintf("ord_m%d", i), 900)}); err != nil {
				t.Fatal(err)
			}
		}
		waitProgress(t, "mails", func() (bool, string) { n := len(mb.messages()); return n == 3, fmt.Sprint(n) })
		for _, m := range mb.messages() {
			if !strings.Contains(m, "Subject: [payhook] order.paid ord_m") || !strings.Contains(m, "Content-Type: text/plain") ||
				!strings.Contains(m, `"paid_by": "pi_m`) {
				t.Errorf("mail:\n%s", m)
			}
		}
		mb.mu.Lock()
		defer mb.mu.Unlock()
		if len(mb.rcpts[0]) != 2 || mb.rcpts[0][1] != "ops@example.com" || mb.authed != 3 {
			t.Errorf("recipients %v, %d logins", mb.rcpts, mb.authed)
		}
	})
}

func TestSMTPConfig(t *testing.T) {
	t.Parallel()
	ok := outbox.SMTPConfig{Addr: "mail.example.com:587", From: "payhook@example.com", To: []string{"a@example.com"}}
	for _, tc := range []struct {
		name string
		edit func(c *outbox.SMTPConfig)
		want string
	}{
		{"no port", func(c *outbox.SMTPConfig) { c.Addr = "mail.example.com" }, "host:port"},
		{"loopback", func(c *outbox.SMTPConfig) { c.Addr = "127.0.0.1:25" }, "loopback"},
		{"metadata", func(c *outbox.SMTPConfig) { c.Addr = "169.254.169.254:25" }, "link-local"},
		{"localhost", func(c *outbox.SMTPConfig) { c.Addr = "localhost:25" }, "local host"},
		{"bad from", func(c *outbox.SMTPConfig) { c.From = "nobody" }, "from"},
		{"no to", func(c *outbox.SMTPConfig) { c.To = nil }, "no recipient"},
		{"bad to", func(c *outbox.SMTPConfig) { c.To = []string{"x"} }, "to"},
		{"password in clear", func(c *outbox.SMTPConfig) { c.Username = "u" }, "starttls"},
	} {
		c := ok
		tc.edit(&c)
		if _, err := outbox.NewSMTP(c); !errors.Is(err, payhook.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewSMTP = %v; want ErrConfig saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := outbox.NewSMTP(ok); err != nil {
		t.Errorf("NewSMTP(%+v) = %v", ok, err)
	}
}

func tlsRoots(pool *x509.CertPool) *tls.Config { return &tls.Config{RootCAs: pool} }
