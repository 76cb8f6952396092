package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/payhook/payhook"
	"github.com/payhook/payhook/provider"
	"github.com/payhook/payhook/provider/hmac"
)

// defaultTolerance is the timestamp tolerance of a source that sets none.
const defaultTolerance = 5 * time.Minute

// fileConfig is the YAML config file.
type fileConfig struct {
	Sources []sourceConfig `yaml:"sources"`
}

// sourceConfig is one entry of sources: a way in, POST /webhooks/{name}.
type sourceConfig struct {
	// Name is the {source} in POST /webhooks/{source}.
	Name string `yaml:"name"`
	// Provider is one of provider.Names(): stripe, paddle, standard,
	// billete, crypto or hmac.
	Provider string `yaml:"provider"`
	// Secrets are the signing secrets; several while rotating.
	Secrets []string `yaml:"secrets"`
	// Environment, optional, is "test" or "live": events that say another
	// environment are ignored.
	Environment string `yaml:"environment"`
	// Tolerance of signed timestamps, e.g. 5m. If zero, defaults to 5m.
	Tolerance duration `yaml:"tolerance"`

	// The fields below configure the "hmac" provider only; see hmac.Config.
	Header          string `yaml:"header"`
	Prefix          string `yaml:"prefix"`
	Encoding        string `yaml:"encoding"`
	TimestampHeader string `yaml:"timestamp_header"`
	Template        string `yaml:"template"`
	IDField         string `yaml:"id_field"`
	IDHeader        string `yaml:"id_header"`
	TypeField       string `yaml:"type_field"`
	TimeField       string `yaml:"time_field"`

	// line is where the source starts in the file, 0 if unknown.
	line int
}

// duration is a time.Duration written the time.ParseDuration way ("5m",
// "90s"). A bare number without a unit, other than 0, is refused.
type duration time.Duration

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: duration must be a string such as 5m", n.Line)
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q (want e.g. 30s or 5m)", n.Line, n.Value)
	}
	*d = duration(v)
	return nil
}

// loadConfig reads the config file at path. Every ${VAR} in a value is
// replaced by getenv(VAR) (os.Getenv if getenv is nil); a reference to an
// unset or empty variable is an error, as is a malformed one such as an
// unclosed "${". Expansion is done once, on the parsed values, so that
// what a variable holds is kept literally, whatever characters it has.
// Unknown keys are errors. Errors other than failing to read the file wrap
// payhook.ErrConfig.
func loadConfig(path string, getenv func(string) string) (*fileConfig, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := parseConfig(raw, getenv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// parseConfig is loadConfig after reading the file.
func parseConfig(raw []byte, getenv func(string) string) (*fileConfig, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("no sources configured: %w", payhook.ErrConfig)
		}
		return nil, fmt.Errorf("%v: %w", err, payhook.ErrConfig)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("the file must hold a single YAML document: %w", payhook.ErrConfig)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	// Unknown keys first: they usually explain the other errors.
	if err := checkKeys(root, reflect.TypeFor[fileConfig](), ""); err != nil {
		return nil, fmt.Errorf("%v: %w", err, payhook.ErrConfig)
	}
	if err := expandNode(root, "", getenv); err != nil {
		return nil, fmt.Errorf("%v: %w", err, payhook.ErrConfig)
	}
	var c fileConfig
	if err := root.Decode(&c); err != nil {
		return nil, fmt.Errorf("%v: %w", err, payhook.ErrConfig)
	}
	if seq := mapValue(root, "sources"); seq != nil && seq.Kind == yaml.SequenceNode && len(seq.Content) == len(c.Sources) {
		for i, item := range seq.Content {
			c.Sources[i].line = item.Line
		}
	}
	if err := c.validate(); err != nil {
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
		v, err := provider.New(s.options())
		if err != nil {
			// provider.New's errors already wrap payhook.ErrConfig.
			return nil, fmt.Errorf("%s: %w", s.label(i), err)
		}
		out = append(out, payhook.Source{
			Name:        s.Name,
			Provider:    s.Provider,
			Environment: s.Environment,
			Verifier:    v,
		})
	}
	return out, nil
}

// options returns the provider options of s.
func (s *sourceConfig) options() provider.Options {
	tol := time.Duration(s.Tolerance)
	if tol == 0 {
		tol = defaultTolerance
	}
	o := provider.Options{
		Provider:  s.Provider,
		Secrets:   slices.Clone(s.Secrets),
		Tolerance: tol,
	}
	if s.Provider == "hmac" {
		o.HMAC = hmac.Config{
			Header:          s.Header,
			Prefix:          s.Prefix,
			Encoding:        s.Encoding,
			TimestampHeader: s.TimestampHeader,
			Template:        s.Template,
			IDField:         s.IDField,
			IDHeader:        s.IDHeader,
			TypeField:       s.TypeField,
			TimeField:       s.TimeField,
		}
	}
	return o
}

// hmacFields returns the hmac-only fields of s by YAML key, in file order.
func (s *sourceConfig) hmacFields() [][2]string {
	return [][2]string{
		{"header", s.Header},
		{"prefix", s.Prefix},
		{"encoding", s.Encoding},
		{"timestamp_header", s.TimestampHeader},
		{"template", s.Template},
		{"id_field", s.IDField},
		{"id_header", s.IDHeader},
		{"type_field", s.TypeField},
		{"time_field", s.TimeField},
	}
}

// label names source i of the file in errors.
func (s *sourceConfig) label(i int) string {
	var b strings.Builder
	if s.Name != "" {
		fmt.Fprintf(&b, "source %q", s.Name)
	} else {
		fmt.Fprintf(&b, "source #%d", i+1)
	}
	if s.line > 0 {
		fmt.Fprintf(&b, " (line %d)", s.line)
	}
	return b.String()
}

// sourceName is what a source name must look like: a URL path segment.
var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// validate checks c without building verifiers. Errors wrap
// payhook.ErrConfig and name the source and field.
func (c *fileConfig) validate() error {
	if len(c.Sources) == 0 {
		return fmt.Errorf("no sources configured: %w", payhook.ErrConfig)
	}
	seen := make(map[string]int, len(c.Sources))
	for i := range c.Sources {
		s := &c.Sources[i]
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s: %s: %w", s.label(i), fmt.Sprintf(format, args...), payhook.ErrConfig)
		}
		switch {
		case s.Name == "":
			return fail("name is required")
		case !sourceName.MatchString(s.Name):
			return fail("name %q must be letters, digits, '_', '.' or '-', starting with a letter or digit", s.Name)
		}
		key := strings.ToLower(s.Name)
		if j, dup := seen[key]; dup {
			return fail("name %q is already used by source #%d", s.Name, j+1)
		}
		seen[key] = i
		if s.Provider == "" {
			return fail("provider is required (one of %s)", strings.Join(provider.Names(), ", "))
		}
		if !slices.Contains(provider.Names(), s.Provider) {
			return fail("provider %q is not one of %s", s.Provider, strings.Join(provider.Names(), ", "))
		}
		if len(s.Secrets) == 0 {
			return fail("secrets: at least one secret is required")
		}
		for j, secret := range s.Secrets {
			if secret == "" {
				return fail("secrets: secret %d is empty", j+1)
			}
		}
		switch s.Environment {
		case "", "test", "live":
		default:
			return fail("environment %q is neither \"test\" nor \"live\"", s.Environment)
		}
		if s.Tolerance < 0 {
			return fail("tolerance %s is negative", time.Duration(s.Tolerance))
		}
		if s.Provider != "hmac" {
			for _, f := range s.hmacFields() {
				if f[1] != "" {
					return fail("%s is only allowed with provider hmac, not %s", f[0], s.Provider)
				}
			}
		}
	}
	return nil
}

// mapValue returns the value of key in mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// unmarshalerType is yaml.Unmarshaler, whose implementations read their
// own node.
var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// checkKeys returns an error naming the first mapping key in n that no
// field of t (by yaml tag) holds, like yaml.Decoder.KnownFields does, but
// on the node tree so that values can be expanded before decoding. Kind
// mismatches are left to Decode.
func checkKeys(n *yaml.Node, t reflect.Type, where string) error {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, item := range n.Content {
			if err := checkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields := make(map[string]reflect.Type)
		for f := range t.Fields() {
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(f.Name)
			}
			fields[name] = f.Type
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" {
				if err := checkKeys(v, t, where); err != nil {
					return err
				}
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				if where == "" {
					return fmt.Errorf("line %d: unknown key %q", k.Line, k.Value)
				}
				return fmt.Errorf("line %d: unknown key %q in %s", k.Line, k.Value, where)
			}
			path := k.Value
			if where != "" {
				path = where + "." + k.Value
			}
			if err := checkKeys(v, ft, path); err != nil {
				return err
			}
		}
	}
	return nil
}

// expandNode replaces ${VAR} references in the scalar values (not the
// keys) of the tree at n. Aliases are not followed: their anchors are
// expanded where they stand, and only once.
func expandNode(n *yaml.Node, where string, getenv func(string) string) error {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := expandNode(c, where, getenv); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expandNode(c, fmt.Sprintf("%s[%d]", where, i), getenv); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			path := k.Value
			if where != "" {
				path = where + "." + k.Value
			}
			if where == "" && k.Value == "sources" && v.Kind == yaml.SequenceNode {
				for j, item := range v.Content {
					label := fmt.Sprintf("source #%d", j+1)
					if name := mapValue(item, "name"); name != nil && name.Kind == yaml.ScalarNode &&
						name.Value != "" && !strings.Contains(name.Value, "$") {
						label = fmt.Sprintf("source %q", name.Value)
					}
					if err := expandNode(item, "", getenv); err != nil {
						return fmt.Errorf("%s: %w", label, err)
					}
				}
				continue
			}
			if err := expandNode(v, path, getenv); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if !strings.Contains(n.Value, "${") {
			return nil
		}
		v, err := expand(n.Value, getenv)
		if err != nil {
			if where == "" {
				return fmt.Errorf("line %d: %v", n.Line, err)
			}
			return fmt.Errorf("line %d: %s: %v", n.Line, where, err)
		}
		// Whatever the variable holds is a string.
		n.Value, n.Tag, n.Style = v, "!!str", yaml.DoubleQuotedStyle
	}
	return nil
}

// varName is the name in a ${NAME} reference.
var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand replaces each ${NAME} in s by getenv(NAME). A "$" not followed by
// "{" is kept. The result is not expanded again.
func expand(s string, getenv func(string) string) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+2:]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed ${ in %q", s[i:])
		}
		name := rest[:end]
		if !varName.MatchString(name) {
			return "", fmt.Errorf("invalid variable reference ${%s} (only ${NAME} is supported)", name)
		}
		v := getenv(name)
		if v == "" {
			return "", fmt.Errorf("environment variable %s is unset or empty", name)
		}
		b.WriteString(v)
		s = rest[end+1:]
	}
}
