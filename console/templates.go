package console

import (
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"strings"
	"time"
)

var funcs = template.FuncMap{
	// t shows a time in UTC to the second; the zero time is a dash.
	"t": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"list": func(s ...string) []string { return s },
	// without encodes q without the named keys.
	"without": func(q url.Values, keys ...string) string {
		c := url.Values{}
		for k, v := range q {
			c[k] = v
		}
		for _, k := range keys {
			c.Del(k)
		}
		return c.Encode()
	},
}

// parsePages parses every page with the layout and the shared parts: one
// template set per page, each defining its own "content".
func parsePages() (map[string]*template.Template, error) {
	shared := []string{"templates/layout.html", "templates/postings.html"}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		if n == shared[0] || n == shared[1] {
			continue
		}
		t, err := template.New("").Funcs(funcs).ParseFS(templateFS, append(shared, n)...)
		if err != nil {
			return nil, fmt.Errorf("console templates: %w", err)
		}
		pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return pages, nil
}
