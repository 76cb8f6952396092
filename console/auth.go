package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/payhook/payhook"
)

// MinTokenBytes is the shortest admin token New accepts.
const MinTokenBytes = 32

// User is a console user from the config: a name and the bcrypt hash of
// the password.
type User struct {
	Name string
	// Hash is the password's bcrypt hash ("$2a$..." or "$2b$...").
	Hash string
}

// Auth checks logins and sessions. Sessions are signed cookies, so every
// instance sharing the config accepts them; the key comes from the admin
// token and the users' hashes, so changing either ends every session. A
// logout ends its session in the database too (store.DB.EndSession), so
// that a copy of its cookie is refused on every instance.
type Auth struct {
	tokenHash  [sha256.Size]byte
	hasToken   bool
	users      map[string][]byte
	dummy      []byte // dummyPassword's hash at the users' cost; nil without users
	key        []byte
	ttl        time.Duration
	trustProxy bool
	now        func() time.Time
	limiter    *limiter
	// ended reports whether a session's nonce was ended by a logout
	// (store.DB.SessionEnded); nil: none is.
	ended func(ctx context.Context, nonce string) (bool, error)
}

// sessionCookie is the name of the session cookie.
const sessionCookie = "payhook_session"

// dummyPassword is hashed, at the cost of the users' own hashes, into
// the hash an unknown user's login is compared against (Auth.dummy), so
// that it takes as long as a known user's.
const dummyPassword = "payhook-no-such-user"

// CheckToken refuses a token (what names it) that is set but shorter
// than MinTokenBytes, with an error wrapping payhook.ErrConfig.
func CheckToken(what, token string) error {
	if token != "" && len(token) < MinTokenBytes {
		return fmt.Errorf("%s has %d bytes; want at least %d (make one with: openssl rand -hex 32): %w",
			what, len(token), MinTokenBytes, payhook.ErrConfig)
	}
	return nil
}

// newAuth checks the credentials of cfg: a token shorter than
// MinTokenBytes, a user without a name or with a hash that is not bcrypt,
// or neither a token nor a user, is an error wrapping payhook.ErrConfig.
func newAuth(cfg Config) (*Auth, error) {
	if cfg.Token == "" && len(cfg.Users) == 0 {
		return nil, fmt.Errorf("console: no admin token and no users (set PAYHOOK_ADMIN_TOKEN or admin.users): %w", payhook.ErrConfig)
	}
	if err := CheckToken("the admin token", cfg.Token); err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	a := &Auth{users: map[string][]byte{}, ttl: cfg.SessionTTL, trustProxy: cfg.TrustProxy, now: cfg.Now,
		limiter: newLimiter(cfg.LoginBurst, cfg.LoginEvery, cfg.Now)}
	mac := hmac.New(sha256.New, []byte("payhook console session v1"))
	if cfg.Token != "" {
		a.tokenHash, a.hasToken = sha256.Sum256([]byte(cfg.Token)), true
		fmt.Fprintf(mac, "token %d:%s\n", len(cfg.Token), cfg.Token)
	}
	cost := 0
	for i, u := range cfg.Users {
		if u.Name == "" || strings.ContainsAny(u.Name, "\n|") {
			return nil, fmt.Errorf("console: user %d: want a name without '|' or newlines: %w", i+1, payhook.ErrConfig)
		}
		c, err := bcrypt.Cost([]byte(u.Hash))
		if err != nil {
			return nil, fmt.Errorf("console: user %s: hash is not a bcrypt hash (%v): %w", u.Name, err, payhook.ErrConfig)
		}
		cost = max(cost, c)
		if _, dup := a.users[u.Name]; dup {
			return nil, fmt.Errorf("console: user %s listed twice: %w", u.Name, payhook.ErrConfig)
		}
		a.users[u.Name] = []byte(u.Hash)
		fmt.Fprintf(mac, "user %s %s\n", u.Name, u.Hash)
	}
	a.key = mac.Sum(nil)
	if cost > 0 {
		var err error
		if a.dummy, err = bcrypt.GenerateFromPassword([]byte(dummyPassword), cost); err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
	}
	return a, nil
}

// session is a logged-in user: who, until when, and the nonce the CSRF
// token derives from.
type session struct {
	User    string
	Expires time.Time
	nonce   string
}

// CSRF returns the session's CSRF token.
func (a *Auth) csrf(s *session) string {
	return a.sign("csrf|" + s.nonce)
}

func (a *Auth) sign(msg string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkLogin reports whether the credentials are right: the admin token
// when user is empty, else the user's password. Both compare in constant
// time (the token over hashes, so its length leaks nothing either).
func (a *Auth) checkLogin(user, secret string) bool {
	if user == "" {
		got := sha256.Sum256([]byte(secret))
		return a.hasToken && subtle.ConstantTimeCompare(got[:], a.tokenHash[:]) == 1
	}
	hash, ok := a.users[user]
	if !ok {
		if a.dummy != nil {
			bcrypt.CompareHashAndPassword(a.dummy, []byte(secret))
		}
		return false
	}
	return bcrypt.CompareHashAndPassword(hash, []byte(secret)) == nil
}

// bearer reports whether r carries the admin token as a bearer token.
func (a *Auth) bearer(r *http.Request) bool {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !a.hasToken {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], a.tokenHash[:]) == 1
}

// newSession makes the cookie of a fresh session of user.
func (a *Auth) newSession(w http.ResponseWriter, r *http.Request, user string) *session {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	s := &session{User: user, Expires: a.now().Add(a.ttl), nonce: hex.EncodeToString(nonce)}
	msg := strings.Join([]string{s.User, strconv.FormatInt(s.Expires.Unix(), 10), s.nonce}, "|")
	value := base64.RawURLEncoding.EncodeToString([]byte(msg)) + "." + a.sign("session|"+msg)
	http.SetCookie(w, a.cookie(r, value, s.Expires))
	return s
}

func (a *Auth) cookie(r *http.Request, value string, expires time.Time) *http.Cookie {
	c := &http.Cookie{Name: sessionCookie, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: a.secure(r)}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.Expires = expires
	}
	return c
}

// secure reports whether r came over TLS, to this server or (when the
// proxy is trusted) to the proxy in front of it.
func (a *Auth) secure(r *http.Request) bool {
	return r.TLS != nil || (a.trustProxy && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// session returns the valid session r carries, or nil.
func (a *Auth) session(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	enc, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil
	}
	msg := string(raw)
	if subtle.ConstantTimeCompare([]byte(sig), []byte(a.sign("session|"+msg))) != 1 {
		return nil
	}
	parts := strings.Split(msg, "|")
	if len(parts) != 3 {
		return nil
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !a.now().Before(time.Unix(exp, 0)) {
		return nil
	}
	if a.ended != nil {
		// Logged out: a copy of the cookie made before is no session. If
		// the database cannot say, no session either.
		if ended, err := a.ended(r.Context(), parts[2]); err != nil || ended {
			return nil
		}
	}
	return &session{User: parts[0], Expires: time.Unix(exp, 0), nonce: parts[2]}
}

// validCSRF reports whether r carries s's CSRF token, in the form field
// csrf or the X-CSRF-Token header.
func (a *Auth) validCSRF(r *http.Request, s *session) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(a.csrf(s))) == 1
}

// clientIP is the address a login attempt is counted against: the peer,
// or when the proxy is trusted the last X-Forwarded-For hop, the one the
// proxy added (those before it are the client's to say); an IPv6 address
// by its /64, which one client holds whole.
func (a *Auth) clientIP(r *http.Request) string {
	addr := r.RemoteAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	if xff := r.Header.Values("X-Forwarded-For"); a.trustProxy && len(xff) > 0 {
		hops := strings.Split(xff[len(xff)-1], ",")
		addr = strings.TrimSpace(hops[len(hops)-1])
		// Some proxies write the client's port too: a port per connection
		// must not make a bucket per connection.
		if ap, err := netip.ParseAddrPort(addr); err == nil {
			addr = ap.Addr().String()
		}
		addr = strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]")
	}
	if ip, err := netip.ParseAddr(addr); err == nil && ip.Is6() && !ip.Is4In6() {
		if p, err := ip.Prefix(64); err == nil {
			return p.String()
		}
	}
	return addr
}

// limiter is a token bucket per client address: burst attempts at once,
// then one every every.
type limiter struct {
	mu      sync.Mutex
	burst   float64
	every   time.Duration
	now     func() time.Time
	buckets map[string]*bucket
	swept   time.Time // the last time full buckets were forgotten
}

// maxBuckets is how many client addresses a limiter keeps before it
// forgets those whose bucket is full again.
const maxBuckets = 10000

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(burst int, every time.Duration, now func() time.Time) *limiter {
	return &limiter{burst: float64(burst), every: every, now: now, buckets: map[string]*bucket{}}
}

// allow takes one attempt from key's bucket; when it is empty it returns
// false and how long until the next attempt is allowed.
func (l *limiter) allow(key string) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.buckets) > maxBuckets && now.Sub(l.swept) >= l.every {
		// Forget the full buckets; at most once an every, so that many
		// addresses do not make every attempt walk them all.
		l.swept = now
		for k, b := range l.buckets {
			if b.tokens+float64(now.Sub(b.at))/float64(l.every) >= l.burst {
				delete(l.buckets, k)
			}
		}
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.every))
	b.at = now
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(l.every))
	}
	b.tokens--
	return true, 0
}
