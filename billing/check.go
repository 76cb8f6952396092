package billing

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/payhook/payhook"
)

// Check returns an error wrapping payhook.ErrMalformed when f cannot be
// applied whatever is stored: a required reference missing, a reference
// that cannot be stored (payhook.CheckRef: NUL, control or format
// characters, too long), a time outside payhook's bounds, an amount
// beyond ±payhook.MaxAmount or of the wrong sign, an unknown subscription
// status. Apply checks every fact first; mappings call it so that such an
// event fails at once, never retried.
func Check(f Fact) error {
	var c checker
	switch f := value(f).(type) {
	case Captured:
		c.payment("payment", f.Payment, 0)
	case Refunded:
		if f.Payment != nil {
			c.payment("payment", *f.Payment, 0)
		}
		c.ref("payment ref", f.PaymentRef, f.Payment == nil)
		c.ref("refund ref", f.RefundRef, true)
		c.amount("refund amount", f.Amount, 1)
		c.ref("refund currency", f.Currency, true)
		c.time("refund time", f.At)
	case RefundFailed:
		c.ref("payment ref", f.PaymentRef, false)
		c.ref("refund ref", f.RefundRef, true)
		c.time("refund failure time", f.At)
	case ChargedBack:
		if f.Payment != nil {
			c.payment("payment", *f.Payment, 0)
		}
		c.ref("payment ref", f.PaymentRef, f.Payment == nil)
		c.ref("dispute ref", f.DisputeRef, true)
		c.amount("dispute amount", f.Amount, 0)
		c.time("chargeback time", f.At)
	case ChargebackWon:
		c.ref("dispute ref", f.DisputeRef, f.ReversalRef == "")
		c.ref("reversal ref", f.ReversalRef, false)
		c.ref("payment ref", f.PaymentRef, f.DisputeRef == "")
		c.amount("won chargeback amount", f.Amount, 0)
		c.time("won chargeback time", f.At)
	case OrderPaid:
		c.ref("order id", f.OrderID, true)
		c.ref("payment ref", f.PaymentRef, true)
		c.time("order paid time", f.At)
	case Settled:
		c.ref("invoice ref", f.InvoiceRef, true)
		c.ref("order id", f.OrderID, false)
		c.amount("settled amount", f.Amount, 1)
		c.ref("currency", f.Currency, true)
		c.ref("chain ref", f.ChainRef, true)
		c.time("settlement time", f.At)
	case Subscription:
		c.ref("subscription ref", f.Ref, true)
		c.ref("customer", f.Customer, false)
		c.ref("plan", f.Plan, false)
		if statusRank(f.Status) == 0 {
			c.fail(fmt.Errorf("subscription status %q is not one of %s: %w", f.Status, strings.Join(statusRanks, ", "), payhook.ErrMalformed))
		}
		c.time("current period end", f.CurrentPeriodEnd)
		c.time("subscription time", f.UpdatedAt)
		c.time("subscription end", f.EndedAt)
	case nil:
		return fmt.Errorf("no fact: %w", payhook.ErrMalformed)
	default:
		return fmt.Errorf("unknown fact %T: %w", f, payhook.ErrMalformed)
	}
	return c.err
}

// checker keeps the first failed check.
type checker struct{ err error }

func (c *checker) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *checker) ref(what, s string, required bool) {
	if s == "" && required {
		c.fail(fmt.Errorf("%s is missing: %w", what, payhook.ErrMalformed))
		return
	}
	if err := payhook.CheckRef(what, s); err != nil {
		c.fail(err)
	}
}

// amount checks that min <= n <= payhook.MaxAmount.
func (c *checker) amount(what string, n, min int64) {
	if err := payhook.CheckAmount(what, n); err != nil {
		c.fail(err)
	} else if n < min {
		c.fail(fmt.Errorf("%s %d is below %d: %w", what, n, min, payhook.ErrMalformed))
	}
}

func (c *checker) time(what string, t time.Time) {
	if err := payhook.CheckTime(what, t); err != nil {
		c.fail(err)
	}
}

func (c *checker) payment(what string, p Payment, min int64) {
	c.ref(what+" ref", p.Ref, true)
	c.ref(what+" order id", p.OrderID, false)
	c.amount(what+" amount", p.Amount, min)
	c.ref(what+" currency", p.Currency, true)
	c.time(what+" capture time", p.CapturedAt)
}

// add returns a+b, or an error wrapping payhook.ErrMalformed when the sum
// would overflow: billing never lets an amount wrap.
func add(what string, a, b int64) (int64, error) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, fmt.Errorf("%s: %d + %d overflows: %w", what, a, b, payhook.ErrMalformed)
	}
	return a + b, nil
}

// malformed returns an error wrapping payhook.ErrMalformed: a fact that
// contradicts what is stored in a way no retry can change.
func malformed(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, payhook.ErrMalformed)...)
}

var errNoSource = errors.New("apply billing facts: empty source")
