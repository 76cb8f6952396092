package apiget

import (
	"context"
	"errors"
	"fmt"
)

// ErrPage is wrapped by the errors of Pages about a page that cannot be
// right: one that repeats an item already listed, or an empty page that
// says more follow. Retrying would read the same page again.
var ErrPage = errors.New("inconsistent list page")

// Page is one page of a cursor-paginated list.
type Page[T any] struct {
	// Items are the page's items and IDs their ids, in the same order.
	Items []T
	IDs   []string
	// Next is the cursor of the next page; "" or More false: the last.
	Next string
	More bool
}

// Pages reads every page of a list, from the first (cursor ""), calling
// read with the cursor of each next page, and returns all items. A page
// read fails is an error; so, wrapping ErrPage, is a page that repeats an
// item of this or an earlier page, or an empty page with a next cursor.
// Nothing is returned with an error.
func Pages[T any](ctx context.Context, read func(ctx context.Context, cursor string) (Page[T], error)) ([]T, error) {
	var all []T
	seen := map[string]bool{}
	cursor := ""
	for n := 1; ; n++ {
		p, err := read(ctx, cursor)
		if err != nil {
			return nil, fmt.Errorf("page %d: %w", n, err)
		}
		for _, id := range p.IDs {
			if seen[id] {
				return nil, fmt.Errorf("page %d repeats item %s: %w", n, id, ErrPage)
			}
			seen[id] = true
		}
		all = append(all, p.Items...)
		if !p.More || p.Next == "" {
			return all, nil
		}
		if len(p.Items) == 0 {
			return nil, fmt.Errorf("page %d is empty but says more follow (cursor %q): %w", n, p.Next, ErrPage)
		}
		cursor = p.Next
	}
}
