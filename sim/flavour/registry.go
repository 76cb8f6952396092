package flavour

import (
	"fmt"
	"strings"
)

// constructors lists the flavours in Names order.
var constructors = []struct {
	name string
	new  func() Flavour
}{
	{"stripe", Stripe},
	{"paddle", Paddle},
	{"billete", Billete},
	{"crypto", Crypto},
}

// Names returns the flavours' names: stripe, paddle, billete, crypto.
func Names() []string {
	out := make([]string, len(constructors))
	for i, c := range constructors {
		out[i] = c.name
	}
	return out
}

// ByName returns a new flavour by its name, or an error naming the
// flavours there are.
func ByName(name string) (Flavour, error) {
	for _, c := range constructors {
		if c.name == name {
			return c.new(), nil
		}
	}
	return nil, fmt.Errorf("flavour: unknown flavour %q (want one of %s)", name, strings.Join(Names(), ", "))
}
