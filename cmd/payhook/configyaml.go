package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/payhook/payhook"
)

// The config file's errors speak YAML, not Go: the line, the key and
// where it is (`config payhook.yaml:12: unknown key "secrt" in source
// "stripe"`), never a Go type such as main.sourceConfig. decodeConfig
// parses the file into a yaml.Node, checks every key and the kind of
// every value against the yaml tags of fileConfig, and only then decodes.

// decodeConfig decodes the one YAML document of raw into c. Errors wrap
// payhook.ErrConfig and start "config PATH:LINE: ".
func decodeConfig(path string, raw []byte, c *fileConfig) error {
	fail := func(line int, format string, args ...any) error {
		at := path
		if line > 0 {
			at += ":" + strconv.Itoa(line)
		}
		return fmt.Errorf("config %s: %s: %w", at, fmt.Sprintf(format, args...), payhook.ErrConfig)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file: no sources, said by validate
		}
		line, msg := yamlError(err)
		return fail(line, "%s", msg)
	}
	if err := dec.Decode(new(yaml.Node)); !errors.Is(err, io.EOF) {
		return fail(0, "the file must hold a single YAML document")
	}
	if len(doc.Content) == 0 {
		return nil // only comments
	}
	root := doc.Content[0]
	if err := checkNode(root, reflect.TypeFor[fileConfig](), "", fail); err != nil {
		return err
	}
	if err := root.Decode(c); err != nil {
		line, msg := yamlError(err)
		return fail(line, "%s", msg)
	}
	return nil
}

// yamlLine finds the line in the errors of the yaml package.
var yamlLine = regexp.MustCompile(`^(?:yaml: )?(?:unmarshal errors:\s*)?line (\d+): `)

// yamlError splits an error of the yaml package into its line (0 when it
// names none) and its message.
func yamlError(err error) (int, string) {
	msg := strings.TrimSpace(err.Error())
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return line, msg[len(m[0]):]
	}
	return 0, strings.TrimPrefix(msg, "yaml: ")
}

// checkNode checks that n fits t, the Go type it will be decoded into
// (a struct with yaml tags, a slice, a string, an int, a bool, or a
// pointer to one of them): every key
// known and given once, every value of the right kind. where names n's
// place for errors ("", `source "stripe"`, "processing").
func checkNode(n *yaml.Node, t reflect.Type, where string, fail func(int, string, ...any) error) error {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.ShortTag() == "!!null" {
		return nil // an empty value: the zero value
	}
	what := "the file"
	if where != "" {
		what = where
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return fail(n.Line, "%s is %s; want keys and values (key: value)", what, kindOf(n))
		}
		keys := yamlKeys(t)
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		slices.Sort(names) // the hint's order, not the map's
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			in := ""
			if where != "" {
				in = " in " + where
			}
			f, ok := keys[k.Value]
			if !ok || k.Kind != yaml.ScalarNode {
				hint := didYouMean(k.Value, names)
				if hint != "" {
					hint = "; " + hint
				}
				return fail(k.Line, "unknown key %q%s%s", k.Value, in, hint)
			}
			if first, dup := seen[k.Value]; dup {
				return fail(k.Line, "key %q given twice%s (first at line %d)", k.Value, in, first)
			}
			seen[k.Value] = k.Line
			if err := checkNode(v, f.Type, placeOf(k.Value, where), fail); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return fail(n.Line, "%s is %s; want a list (- item, or [a, b])", what, kindOf(n))
		}
		for i, item := range n.Content {
			place := fmt.Sprintf("item %d of %s", i+1, what)
			if t.Elem().Kind() == reflect.Struct && where == `"sources"` {
				place = sourceLabel(item, i)
			}
			if err := checkNode(item, t.Elem(), place, fail); err != nil {
				return err
			}
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return fail(n.Line, "%s is %s; want a single value", what, kindOf(n))
		}
	case reflect.Int:
		if _, err := strconv.Atoi(n.Value); n.Kind != yaml.ScalarNode || err != nil {
			return fail(n.Line, "%s is %s; want a whole number", what, quoteNumber(n))
		}
	case reflect.Bool:
		switch {
		case n.Kind != yaml.ScalarNode:
			return fail(n.Line, "%s is %s; want true or false", what, kindOf(n))
		case n.ShortTag() != "!!bool":
			return fail(n.Line, "%s is neither true nor false", what)
		}
	case reflect.Pointer: // an optional value
		return checkNode(n, t.Elem(), where, fail)
	}
	return nil
}

// placeOf names the value of key inside where.
func placeOf(key, where string) string {
	switch where {
	case "":
		if key == "processing" {
			return "processing"
		}
		return strconv.Quote(key)
	default:
		return strconv.Quote(key) + " in " + where
	}
}

// sourceLabel names item i of sources as the errors after decoding do:
// by its name when it has one, else by its number.
func sourceLabel(item *yaml.Node, i int) string {
	if item.Kind == yaml.MappingNode {
		for j := 0; j+1 < len(item.Content); j += 2 {
			if k, v := item.Content[j], item.Content[j+1]; k.Value == "name" && v.Kind == yaml.ScalarNode && v.Value != "" {
				return fmt.Sprintf("source %q", v.Value)
			}
		}
	}
	return fmt.Sprintf("source #%d", i+1)
}

// yamlKeys returns the fields of struct type t by their yaml key.
func yamlKeys(t reflect.Type) map[string]reflect.StructField {
	keys := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" && name != "-" && f.IsExported() {
			keys[name] = f
		}
	}
	return keys
}

// kindOf says what a node is, in YAML's words. A value is never
// quoted: it may be a secret.
func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping (key: value)"
	case yaml.SequenceNode:
		return "a list"
	default:
		return "a single value"
	}
}

// quoteNumber quotes what stands where a number belongs (no secret goes
// there), short.
func quoteNumber(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return kindOf(n)
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}
