package main

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/jobs"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/adapter"
	"github.com/payhook/payhook/provider/hmac"
)

// fileConfig is the YAML config file.
type fileConfig struct {
	Sources    []sourceConfig   `yaml:"sources"`
	Processing processingConfig `yaml:"processing"`
	Admin      adminConfig      `yaml:"admin"`
	Sinks      []sinkConfig     `yaml:"sinks"` // sinks.go
	path       string           // the file, named in errors
}

// processingConfig tunes the job queue; zero values take the defaults.
type processingConfig struct {
	// Workers is how many events' jobs run at once (default 8 on
	// PostgreSQL, 4 on SQLite; 20 on either when a source has API
	// credentials).
	Workers int `yaml:"workers"`
	// DeliveryWorkers is how many deliveries' jobs (retries, and first
	// attempts of the deliveries of events processed alone) run at once,
	// in a queue of their own (jobs.Config.DeliveryWorkers; default 4, 2
	// on SQLite; workers when a source has API credentials).
	DeliveryWorkers int `yaml:"delivery_workers"`
	// MaxAttempts is how many times an event is tried before it is failed
	// (default 25).
	MaxAttempts int `yaml:"max_attempts"`
	// Batch is how many events one processing transaction applies at
	// once, within 8 MiB of payloads (jobs.Config.Batch; default 512; 1
	// turns batching off).
	Batch int `yaml:"batch"`
	// RetryBase is the first retry's delay; each next one doubles, up to
	// RetryMax (default 1s: 25 attempts span about 14 hours).
	RetryBase string `yaml:"retry_base"`
	// RetryMax is the longest delay between two attempts (default 1h).
	RetryMax string `yaml:"retry_max"`
	// PauseLag: while a burst of deliveries is being stored, an event less
	// than this behind waits (jobs.Config.PauseLag; default 3s, or
	// max_lag if less; a steady load waits 200ms at most); "off" never
	// pauses.
	PauseLag string `yaml:"pause_lag"`
	// MaxLag: past this behind, processing runs at full speed even while
	// deliveries are being stored (jobs.Config.BusyMaxLag; default 10s,
	// at most 30s).
	MaxLag string `yaml:"max_lag"`
}

// lags returns p's PauseLag and BusyMaxLag for jobs.Config: zero for
// the defaults, a negative PauseLag for "off".
func (p processingConfig) lags() (pause, most time.Duration, err error) {
	switch p.PauseLag {
	case "":
	case "off":
		pause = -1
	default:
		if pause, err = time.ParseDuration(p.PauseLag); err != nil || pause <= 0 {
			return 0, 0, fmt.Errorf("processing: pause_lag %q is neither a positive duration nor off: %w", p.PauseLag, payhook.ErrConfig)
		}
	}
	if p.MaxLag != "" {
		if most, err = time.ParseDuration(p.MaxLag); err != nil || most <= 0 {
			return 0, 0, fmt.Errorf("processing: max_lag %q is not a positive duration: %w", p.MaxLag, payhook.ErrConfig)
		}
		if limit := jobs.DefaultJobTimeout / 2; most > limit {
			return 0, 0, fmt.Errorf("processing: max_lag %s is more than %s, half of an attempt's time limit, which the wait counts against: %w",
				most, limit, payhook.ErrConfig)
		}
	}
	return pause, most, nil
}

// batch returns p's Batch for jobs.Config: zero for the default.
func (p processingConfig) batch() (int, error) {
	if p.Batch < 0 {
		return 0, fmt.Errorf("processing: batch %d is negative (1 applies the events one by one): %w", p.Batch, payhook.ErrConfig)
	}
	return p.Batch, nil
}

// backoff returns the retry delays of p.
func (p processingConfig) backoff() (func(attempt int) time.Duration, error) {
	base, err := time.ParseDuration(cmp.Or(p.RetryBase, "1s"))
	if err != nil || base <= 0 {
		return nil, fmt.Errorf("processing: retry_base %q is not a positive duration: %w", p.RetryBase, payhook.ErrConfig)
	}
	longest, err := time.ParseDuration(cmp.Or(p.RetryMax, "1h"))
	if err != nil || longest < base {
		return nil, fmt.Errorf("processing: retry_max %q is not a duration of at least retry_base: %w", p.RetryMax, payhook.ErrConfig)
	}
	return func(attempt int) time.Duration {
		d := base << min(max(attempt-1, 0), 30)
		if d <= 0 || d > longest {
			return longest
		}
		return d
	}, nil
}

// sourceConfig is one entry of sources: a way in, POST /webhooks/{name}.
// Every field is a string, so that any may be given as ${VAR}.
type sourceConfig struct {
	Name        string   `yaml:"name"`        // the {source} in the URL
	Provider    string   `yaml:"provider"`    // one of provider.Names()
	Secrets     []string `yaml:"secrets"`     // several while rotating
	Environment string   `yaml:"environment"` // "", "test" or "live"
	Tolerance   string   `yaml:"tolerance"`   // e.g. 5m; "" is the provider's default
	// APIURL and APIKey let processing read the current state of a
	// resource from the provider (those of provider.APIs()), and
	// backfill, reconcile and refunds reach it.
	APIURL string `yaml:"api_url"`
	APIKey string `yaml:"api_key"`
	// Fetch false keeps processing from reading each event's resource
	// (the credentials then serve backfill, reconcile and refunds only):
	// events are applied from their payloads, in batches, as without
	// credentials. Default true when api_url is set.
	Fetch *bool `yaml:"fetch"`
	// APIRate bounds processing's reads of the provider's API, in
	// requests a second (payhook.Source.FetchRate), so that a sale's
	// events wait their turn rather than be refused (429) and retried;
	// off: no bound. Default the provider's (provider.APIRate: Stripe 20,
	// Paddle 3).
	APIRate string `yaml:"api_rate"`
	// APIVersion pins the provider's API version: requests ask for it,
	// and an event or listed object of another raises api_version_drift.
	APIVersion string `yaml:"api_version"`
	// Reconcile, if set, schedules the source's reconciliation (see
	// scheduleConfig); it needs api_url and api_key.
	Reconcile scheduleConfig `yaml:"reconcile"`
	// Silence, if set (e.g. 6h), raises source_silent when nothing was
	// received from the source for that long; default off.
	Silence string `yaml:"silence"`
	// SignatureFailures and SignatureWindow: this many deliveries whose
	// signature was refused within the window, none valid after them,
	// raise signature_failures (a secret rotated at the provider but not
	// here, or a wrong one) until a valid signature comes; default 20 in
	// 5m; signature_failures: off turns it off.
	SignatureFailures string `yaml:"signature_failures"`
	SignatureWindow   string `yaml:"signature_window"`

	// The options of provider hmac only; see hmac.Config.
	Header          string `yaml:"header"`
	Prefix          string `yaml:"prefix"`
	Encoding        string `yaml:"encoding"`
	TimestampHeader string `yaml:"timestamp_header"`
	Template        string `yaml:"template"`
	IDField         string `yaml:"id_field"`
	IDHeader        string `yaml:"id_header"`
	TypeField       string `yaml:"type_field"`
	TimeField       string `yaml:"time_field"`
}

// field is a string field of a sourceConfig by its YAML key.
type field struct {
	key      string
	value    *string
	hmacOnly bool
}

// fields returns the string fields of s, secrets aside, name first.
func (s *sourceConfig) fields() []field {
	return []field{
		{"name", &s.Name, false}, {"provider", &s.Provider, false},
		{"environment", &s.Environment, false}, {"tolerance", &s.Tolerance, false},
		{"api_url", &s.APIURL, false}, {"api_key", &s.APIKey, false}, {"api_version", &s.APIVersion, false},
		{"api_rate", &s.APIRate, false},
		{"header", &s.Header, true}, {"prefix", &s.Prefix, true}, {"encoding", &s.Encoding, true},
		{"timestamp_header", &s.TimestampHeader, true}, {"template", &s.Template, true},
		{"id_field", &s.IDField, true}, {"id_header", &s.IDHeader, true},
		{"type_field", &s.TypeField, true}, {"time_field", &s.TimeField, true},
	}
}

// loadConfig reads the config file at path. Unknown keys are errors. Then
// every ${VAR} in a string value or a secret is replaced, once, by
// getenv(VAR) (os.Getenv if getenv is nil), so that what a variable holds
// is kept literally; an unset or empty variable is an error. Errors other
// than failing to read the file wrap payhook.ErrConfig.
func loadConfig(path string, getenv func(string) string) (*fileConfig, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c := fileConfig{path: path}
	if err := decodeConfig(path, raw, &c); err != nil {
		return nil, err
	}
	// Every reference that fails is reported, not only the first.
	var errs []error
	for _, e := range c.Admin.expand(getenv) {
		errs = append(errs, fmt.Errorf("%sadmin: %v", c.prefix(), e))
	}
	for i := range c.Sources {
		for _, e := range c.Sources[i].expand(getenv) {
			errs = append(errs, fmt.Errorf("%s%s: %v", c.prefix(), c.Sources[i].label(i), e))
		}
	}
	for i := range c.Sinks {
		for _, e := range c.Sinks[i].expand(getenv) {
			errs = append(errs, fmt.Errorf("%s%s: %v", c.prefix(), c.Sinks[i].label(i), e))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w\n%w", errors.Join(errs...), payhook.ErrConfig)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := c.validateSinks(); err != nil {
		return nil, err
	}
	return &c, nil
}

// sources builds the configured sources, each with its verifier. Errors
// wrap payhook.ErrConfig and name the source.
func (c *fileConfig) sources() ([]payhook.Source, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	out := make([]payhook.Source, 0, len(c.Sources))
	for i := range c.Sources {
		s := &c.Sources[i]
		tol, _ := s.tolerance() // validated
		v, err := provider.New(provider.Options{
			Provider: s.Provider, Secrets: slices.Clone(s.Secrets), Tolerance: tol,
			HMAC: hmac.Config{
				Header: s.Header, Prefix: s.Prefix, Encoding: s.Encoding,
				TimestampHeader: s.TimestampHeader, Template: s.Template,
				IDField: s.IDField, IDHeader: s.IDHeader, TypeField: s.TypeField, TimeField: s.TimeField,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", c.prefix(), s.label(i), err) // wraps payhook.ErrConfig
		}
		src := payhook.Source{Name: s.Name, Provider: s.Provider, Environment: s.Environment, Verifier: v, APIVersion: s.APIVersion}
		if s.APIURL != "" {
			client, err := provider.NewClient(s.Provider, adapter.ClientConfig{BaseURL: s.APIURL, Key: s.APIKey, APIVersion: s.APIVersion})
			if err != nil {
				return nil, fmt.Errorf("%s%s: %w", c.prefix(), s.label(i), err) // wraps payhook.ErrConfig
			}
			if s.fetches() {
				src.Fetch = client.Fetch
				src.FetchRate, _ = s.apiRate() // validated
			}
		}
		out = append(out, src)
	}
	return out, nil
}

// prefix starts the errors about c.
func (c *fileConfig) prefix() string {
	if c.path == "" {
		return "config: "
	}
	return "config " + c.path + ": "
}

// sourceName is what a source name must look like: a URL path segment.
var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// validate checks what provider.New does not. Errors wrap
// payhook.ErrConfig and name the source.
func (c *fileConfig) validate() error {
	if len(c.Sources) == 0 {
		return fmt.Errorf("%sno sources configured: %w", c.prefix(), payhook.ErrConfig)
	}
	seen := make(map[string]int, len(c.Sources))
	for i := range c.Sources {
		s := &c.Sources[i]
		err := s.validate()
		if j, dup := seen[strings.ToLower(s.Name)]; err == nil && dup {
			err = fmt.Errorf("name %q is already used by source #%d", s.Name, j+1)
		}
		if err != nil {
			return fmt.Errorf("%s%s: %v: %w", c.prefix(), s.label(i), err, payhook.ErrConfig)
		}
		seen[strings.ToLower(s.Name)] = i
	}
	return nil
}

// apiRate parses the source's api_rate: requests a second, 0 for off,
// the provider's own bound when not set.
func (s *sourceConfig) apiRate() (float64, error) {
	switch s.APIRate {
	case "":
		return provider.APIRate(s.Provider), nil
	case "off":
		return 0, nil
	}
	r, err := strconv.ParseFloat(s.APIRate, 64)
	if err != nil || !(r > 0) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("api_rate %q is neither a number of requests a second above 0, such as 20, nor off", s.APIRate)
	}
	return r, nil
}

// fetches reports whether processing reads each event's resource from
// the provider: with api_url, unless fetch is false.
func (s *sourceConfig) fetches() bool {
	return s.APIURL != "" && (s.Fetch == nil || *s.Fetch)
}

func (s *sourceConfig) validate() error {
	switch {
	case s.Name == "":
		return errors.New("name is required")
	case !sourceName.MatchString(s.Name):
		return fmt.Errorf("name %q must be letters, digits, '_', '.' or '-', starting with a letter or digit", s.Name)
	case s.Environment != "" && s.Environment != "test" && s.Environment != "live":
		return fmt.Errorf("environment %q is neither test nor live", s.Environment)
	// An unknown provider is left to provider.New, which lists the known.
	case (s.APIURL == "") != (s.APIKey == ""):
		return errors.New("api_url and api_key go together")
	case s.Fetch != nil && *s.Fetch && s.APIURL == "":
		return errors.New("fetch: reading each event's resource needs api_url and api_key")
	case s.APIRate != "" && s.APIURL == "":
		return errors.New("api_rate: bounds the reads of api_url, which is not set")
	case s.APIRate != "" && !s.fetches():
		return errors.New("api_rate: bounds processing's reads of each event's resource, which fetch: false turns off")
	case s.Reconcile.set() && s.APIURL == "":
		return errors.New("reconcile: a scheduled reconciliation needs api_url and api_key")
	case s.APIURL != "" && !slices.Contains(provider.APIs(), s.Provider):
		return fmt.Errorf("api_url: payhook reads the API of providers %s only, not %s",
			strings.Join(provider.APIs(), " and "), s.Provider)
	case s.Environment != "" && slices.Contains(provider.Names(), s.Provider) && !provider.ReportsEnvironment(s.Provider):
		return fmt.Errorf("provider %s does not say an event's environment; remove environment "+
			"(and give each environment its own source and secret)", s.Provider)
	}
	for _, f := range s.fields() {
		if f.hmacOnly && *f.value != "" && s.Provider != "hmac" {
			return fmt.Errorf("%s is only allowed with provider hmac, not %s", f.key, s.Provider)
		}
	}
	if _, err := s.silence(); err != nil {
		return err
	}
	if _, err := s.apiRate(); err != nil {
		return err
	}
	if _, _, err := s.signatureAlert(); err != nil {
		return err
	}
	if s.Reconcile.set() {
		if _, _, err := s.Reconcile.parse(); err != nil {
			return err
		}
	}
	_, err := s.tolerance()
	return err
}

// tolerance parses s.Tolerance; "" is zero, the provider's default.
func (s *sourceConfig) tolerance() (time.Duration, error) {
	d, err := time.ParseDuration(cmp.Or(s.Tolerance, "0"))
	if err != nil {
		return 0, fmt.Errorf("tolerance %q is not a duration such as 30s or 5m", s.Tolerance)
	}
	return d, nil
}

// label names source i of the file in errors.
func (s *sourceConfig) label(i int) string {
	if s.Name != "" {
		return fmt.Sprintf("source %q", s.Name)
	}
	return fmt.Sprintf("source #%d", i+1)
}

// expand expands the ${VAR} references of every string field and
// secret, and returns the error of each field that failed.
func (s *sourceConfig) expand(getenv func(string) string) []error {
	var errs []error
	for _, f := range s.fields() {
		errs = expandField(errs, f.value, f.key, getenv)
	}
	for i := range s.Secrets {
		errs = expandField(errs, &s.Secrets[i], fmt.Sprintf("secret %d", i+1), getenv)
	}
	return errs
}

// expandField expands *v in place, or appends to errs its error, which
// names the field as key.
func expandField(errs []error, v *string, key string, getenv func(string) string) []error {
	out, err := expand(*v, getenv)
	if err != nil {
		return append(errs, fmt.Errorf("%s: %v", key, err))
	}
	*v = out
	return errs
}

// varRef is a ${NAME} reference, or the start of a malformed one.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)?(\})?`)

// expand replaces each ${NAME} in v by getenv(NAME), which must not be
// empty. A "$" not followed by "{" is kept; the result is not expanded
// again. Errors quote the reference, never v: it may be a secret.
func expand(v string, getenv func(string) string) (string, error) {
	var err error
	out := varRef.ReplaceAllStringFunc(v, func(ref string) string {
		m := varRef.FindStringSubmatch(ref)
		switch {
		case err != nil:
		case m[1] == "" || m[2] == "":
			err = fmt.Errorf("malformed variable reference %q (only ${NAME} is supported)", ref)
		case getenv(m[1]) == "":
			err = fmt.Errorf("environment variable %s is unset or empty", m[1])
		default:
			return getenv(m[1])
		}
		return ref
	})
	return out, err
}
