package flavour

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// paddleListPerPage is the most each of Paddle's lists gives per page;
// Paddle answers a larger per_page with its most, as the sim does.
var paddleListPerPage = map[string]int{"/transactions": 30, "/adjustments": 50, "/subscriptions": 200}

// paddleActions maps the adjustment actions Paddle filters by to the kind
// of object the sim lists for them: refunds and chargebacks; the other
// actions (credits, chargeback warnings and reversals) are ones the sim
// never makes, so their filter lists nothing.
var paddleActions = map[string]string{
	"refund": ObjectRefund, "chargeback": ObjectDispute, "chargeback_reverse": "chargeback_reverse",
	"chargeback_warning": "chargeback_warning", "chargeback_warning_reverse": "chargeback_warning_reverse",
	"credit": "credit", "credit_reverse": "credit_reverse",
}

// ListPaths: Paddle's transactions (the payments), adjustments (their
// refunds and chargebacks) and subscriptions lists.
func (paddleFlavour) ListPaths() map[string]string {
	return map[string]string{"/transactions": ObjectPayment, "/adjustments": ObjectAdjustment, "/subscriptions": ObjectSubscription}
}

// ListQuery reads Paddle's list parameters: after (an id of the sim: the
// after of the previous page's meta.pagination.next), per_page (from 1;
// above the list's most, its most), order_by (id[ASC] or id[DESC]; on
// transactions also created_at[ASC|DESC], the same order in the sim),
// created_at[GTE] on transactions (RFC 3339) and action on adjustments.
// Any other parameter is an error: Paddle's lists have none the sim
// could honour.
func (paddleFlavour) ListQuery(r *http.Request) (Query, error) {
	p, err := params(r)
	if err != nil {
		return Query{}, err
	}
	path := r.URL.Path
	q := Query{Limit: paddleListPerPage[path]}
	for k, v := range p {
		switch {
		case k == "after":
			if q.Cursor, err = parseCursor(k, v); err != nil {
				return Query{}, err
			}
		case k == "per_page":
			n, perr := strconv.Atoi(v)
			if perr != nil || n < 1 {
				return Query{}, fmt.Errorf("list query: per_page must be a positive integer, not %q: %w", v, ErrQuery)
			}
			q.Limit = min(n, paddleListPerPage[path])
		case k == "order_by":
			switch v {
			case "id[ASC]":
			case "id[DESC]":
				q.Descending = true
			case "created_at[ASC]", "created_at[DESC]":
				if path != "/transactions" {
					return Query{}, fmt.Errorf("list query: order_by %q: %s orders by id only: %w", v, path, ErrQuery)
				}
				q.Descending = v == "created_at[DESC]"
			default:
				return Query{}, fmt.Errorf("list query: order_by %q: want a field and [ASC] or [DESC]: %w", v, ErrQuery)
			}
		case k == "created_at[GTE]" && path == "/transactions":
			if q.CreatedFrom, err = parseRFC3339(k, v); err != nil {
				return Query{}, err
			}
		case k == "action" && path == "/adjustments":
			t, ok := paddleActions[v]
			if !ok {
				return Query{}, fmt.Errorf("list query: action %q is no adjustment action: %w", v, ErrQuery)
			}
			q.Type = t
		default:
			return Query{}, fmt.Errorf("list query: %s: unknown parameter %s: %w", path, k, ErrQuery)
		}
	}
	return q, nil
}

// ListPage renders Paddle's list response, as EventsPage does: next is
// set on the last page too (after its last object), has_more says
// whether more follow, per_page is the page's length. Payments render as
// completed transactions, refunds and chargebacks as the adjustments
// their events carry (ids "adj_" + the refund's id, "adj_cb_" + the
// payment's; a won chargeback's status reversed, as Paddle marks it), and
// subscriptions as their events' entity.
func (f paddleFlavour) ListPage(kind string, objs []Event, next string) ([]byte, error) {
	data, err := rawList(objs, func(ev Event) ([]byte, error) { return json.Marshal(paddleListed(kind, ev)) })
	if err != nil {
		return nil, fmt.Errorf("paddle: render %s list: %w", kind, err)
	}
	path := ""
	for p, k := range f.ListPaths() {
		if k == kind {
			path = p
		}
	}
	cursor := next
	if cursor == "" && len(objs) > 0 {
		cursor = objs[len(objs)-1].ID
	}
	var nextURL string
	if cursor != "" {
		nextURL = path + "?" + url.Values{"after": {cursor}}.Encode()
	}
	return json.Marshal(paddleList{Data: data, Meta: paddleMeta{
		RequestID:  paddleRequestID(),
		Pagination: paddlePagination{PerPage: len(objs), Next: nextURL, HasMore: next != ""},
	}})
}

// paddleRequestID is a request id of meta, shaped like Paddle's.
func paddleRequestID() string {
	return randomString(rand.Reader, 8, lowerAlnum) + "-" + randomString(rand.Reader, 4, lowerAlnum) + "-" + randomString(rand.Reader, 12, lowerAlnum)
}

// paddleListed shapes one listed object as Paddle's entity.
func paddleListed(kind string, ev Event) map[string]any {
	d := ev.Data
	created := ev.CreatedAt.UTC().Format(time.RFC3339Nano)
	cur := d["currency"]
	totals := func(amount any) map[string]any {
		a := amountString(amount)
		return map[string]any{"subtotal": a, "tax": "0", "total": a, "fee": "0", "earnings": a, "currency_code": cur}
	}
	switch {
	case kind == ObjectPayment:
		t := totals(d["amount"])
		t["discount"], t["grand_total"], t["credit"], t["credit_to_balance"], t["balance"] = "0", t["total"], "0", "0", "0"
		return map[string]any{
			"id": d["id"], "status": "completed", "customer_id": nil, "address_id": nil, "business_id": nil,
			"custom_data": map[string]any{"order_id": d["order_id"]}, "origin": "web", "collection_mode": "automatic",
			"subscription_id": nil, "invoice_id": nil, "invoice_number": nil, "currency_code": cur, "discount_id": nil,
			"created_at": created, "updated_at": d["updated_at"], "billed_at": created,
			"details": map[string]any{"totals": t},
		}
	case ev.Type == ObjectRefund:
		status := "approved"
		if str(d, "status") == "failed" {
			status = "rejected"
		}
		reason := d["reason"]
		if reason == nil {
			reason = "requested_by_customer"
		}
		return map[string]any{
			"id": "adj_" + str(d, "id"), "action": "refund", "transaction_id": d["payment_id"], "refund_id": d["id"],
			"subscription_id": nil, "customer_id": nil, "reason": reason, "credit_applied_to_balance": nil,
			"currency_code": cur, "status": status, "totals": totals(d["amount"]), "created_at": created, "updated_at": created,
		}
	case ev.Type == ObjectDispute:
		status := "reversed"
		if str(d, "status") == "charged_back" {
			status = "approved"
		}
		return map[string]any{
			"id": "adj_cb_" + str(d, "id"), "action": "chargeback", "type": "full", "transaction_id": d["id"],
			"subscription_id": nil, "customer_id": nil, "reason": "fraud", "credit_applied_to_balance": nil,
			"currency_code": cur, "status": status, "totals": totals(d["amount"]), "created_at": created, "updated_at": d["updated_at"],
		}
	}
	// A subscription: its entity as of its last change.
	if t, err := time.Parse(time.RFC3339Nano, str(d, "updated_at")); err == nil {
		ev.CreatedAt = t
	}
	o := paddleEntity(ev)
	delete(o, "object")
	return o
}

// VersionHeader: the sim's Paddle says, in Paddle-Version, the version
// asked for, else the account's (Paddle itself says none).
func (paddleFlavour) VersionHeader() (string, bool) { return "Paddle-Version", true }
