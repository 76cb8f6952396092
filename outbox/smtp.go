package outbox

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"net/netip"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// SMTPConfig configures an SMTP sink.
type SMTPConfig struct {
	// Addr is the mail server, host:port. Required.
	Addr string
	// Username and Password, if set, authenticate with AUTH PLAIN, which
	// needs StartTLS.
	Username, Password string
	// StartTLS upgrades the connection before anything is sent; the
	// server's certificate is checked against TLS (default: the system's
	// roots and the host of Addr).
	StartTLS bool
	TLS      *tls.Config
	// From is the sender's address; To the recipients'. Required.
	From string
	To   []string
	// AllowPrivate lets Addr be a loopback, private or link-local address,
	// as for HTTPConfig.
	AllowPrivate bool
	// Timeout bounds one message's delivery. Default 30 seconds.
	Timeout time.Duration
}

// SMTP is a sink that mails each fact as one plain-text message whose
// subject names the fact's type and subject.
type SMTP struct {
	cfg  SMTPConfig
	host string
}

// NewSMTP returns the SMTP sink of cfg. It returns an error wrapping
// payhook.ErrConfig for a bad address, a refused host (see CheckURL), a
// bad sender or recipient, or credentials without StartTLS.
func NewSMTP(cfg SMTPConfig) (*SMTP, error) {
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("smtp addr %q: want host:port: %w", cfg.Addr, payhook.ErrConfig)
	}
	if !cfg.AllowPrivate {
		if ip, err := netip.ParseAddr(host); err == nil && nonPublic(ip) != "" {
			return nil, fmt.Errorf("smtp addr %q: %s is a %s address (set allow_private to allow it): %w",
				cfg.Addr, ip, nonPublic(ip), payhook.ErrConfig)
		}
		if h := strings.ToLower(host); h == "localhost" || strings.HasSuffix(h, ".localhost") {
			return nil, fmt.Errorf("smtp addr %q: the local host (set allow_private to allow it): %w", cfg.Addr, payhook.ErrConfig)
		}
	}
	if _, err := mail.ParseAddress(cfg.From); err != nil || cfg.From == "" {
		return nil, fmt.Errorf("smtp from %q: not an address: %w", cfg.From, payhook.ErrConfig)
	}
	if len(cfg.To) == 0 {
		return nil, fmt.Errorf("smtp: no recipient (to): %w", payhook.ErrConfig)
	}
	for _, to := range cfg.To {
		if _, err := mail.ParseAddress(to); err != nil {
			return nil, fmt.Errorf("smtp to %q: not an address: %w", to, payhook.ErrConfig)
		}
	}
	if cfg.Username != "" && !cfg.StartTLS {
		return nil, fmt.Errorf("smtp: a username needs starttls (the password would go in clear): %w", payhook.ErrConfig)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &SMTP{cfg: cfg, host: host}, nil
}

// Target returns the mail server's address.
func (s *SMTP) Target() string { return s.cfg.Addr }

// Send mails f.
func (s *SMTP) Send(ctx context.Context, f Fact) (Receipt, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	dialer := &net.Dialer{Control: dialControl(s.cfg.AllowPrivate)}
	conn, err := dialer.DialContext(ctx, "tcp", s.cfg.Addr)
	if err != nil {
		return Receipt{}, fmt.Errorf("smtp %s: %w", s.cfg.Addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	c, err := smtp.NewClient(conn, s.host)
	if err != nil {
		conn.Close()
		return receipt(err), fmt.Errorf("smtp %s: %w", s.cfg.Addr, err)
	}
	defer c.Close()
	if err := s.send(c, f); err != nil {
		return receipt(err), fmt.Errorf("smtp %s: fact %s: %w", s.cfg.Addr, f.ID, err)
	}
	return Receipt{Status: 250}, nil
}

func (s *SMTP) send(c *smtp.Client, f Fact) error {
	if err := c.Hello("payhook"); err != nil {
		return err
	}
	if s.cfg.StartTLS {
		tc := s.cfg.TLS
		if tc == nil {
			tc = &tls.Config{}
		} else {
			tc = tc.Clone()
		}
		if tc.ServerName == "" {
			tc.ServerName = s.host
		}
		if err := c.StartTLS(tc); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
	}
	if s.cfg.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", s.cfg.Username, s.cfg.Password, s.host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	from, _ := mail.ParseAddress(s.cfg.From)
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	for _, to := range s.cfg.To {
		a, _ := mail.ParseAddress(to)
		if err := c.Rcpt(a.Address); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(s.message(f)); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// message is the mail of f: headers and a plain-text body, CRLF lines.
func (s *SMTP) message(f Fact) []byte {
	var b bytes.Buffer
	line := func(format string, args ...any) {
		fmt.Fprintf(&b, format, args...)
		b.WriteString("\r\n")
	}
	line("From: %s", s.cfg.From)
	line("To: %s", strings.Join(s.cfg.To, ", "))
	line("Subject: %s", mime.QEncoding.Encode("utf-8", oneLine("[payhook] "+f.Type+" "+f.Subject)))
	line("Date: %s", time.Now().UTC().Format(time.RFC1123Z))
	line("Message-ID: <%s@payhook>", f.ID)
	line("MIME-Version: 1.0")
	line("Content-Type: text/plain; charset=utf-8")
	line("Content-Transfer-Encoding: 8bit")
	line("")
	line("%s", oneLine(f.Type)+" "+oneLine(f.Subject))
	line("")
	line("id:        %s", f.ID)
	line("source:    %s", oneLine(f.Source))
	line("timestamp: %s", f.Timestamp.Format(time.RFC3339))
	line("")
	var data bytes.Buffer
	if json.Indent(&data, f.Data, "", "  ") != nil {
		data.Reset()
		data.Write(f.Data)
	}
	// The DATA writer dot-stuffs lines.
	for _, l := range strings.Split(data.String(), "\n") {
		line("%s", strings.TrimRight(l, "\r"))
	}
	return b.Bytes()
}

// oneLine keeps s on one header line.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// receipt is the SMTP reply code of err, when it is one.
func receipt(err error) Receipt {
	var te *textproto.Error
	if errors.As(err, &te) {
		return Receipt{Status: te.Code, Response: te.Msg}
	}
	return Receipt{}
}
