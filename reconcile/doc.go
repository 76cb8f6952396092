// Package reconcile finds what webhooks never brought: Backfill lists the
// provider's events and stores the missing ones through the receiver's
// path; Reconcile lists the provider's recent objects (payments, refunds,
// disputes, subscriptions) and compares them with payhook's billing
// state. Neither corrects money silently: Reconcile reports each
// difference, raises one alert per difference and says which events
// would correct it; a backfill or a replay corrects through the normal
// path.
//
// The provider lists the objects it created in the window; payhook's in
// the window are those it first stored then. A payment or subscription
// payhook stored in the window that the provider's list does not have
// (made at the provider before the window: the renewal of a subscription
// older than payhook's deployment, a payment payhook first saw through a
// later refund, so that its captured_at is the refund's time) is
// retrieved one by one, when the client is an adapter.ObjectGetter, and
// compared as a listed one. A payment whose captured_at is before the
// window is not retrieved: it was made before the window.
//
// Only a 404 makes a retrieved object missing_at_provider, and only a 404
// the run trusts: one from a client that, in the same run, answered a
// retrieve of the same kind with the object. When every retrieve of a
// kind answered 404, the first object of that kind the provider listed is
// retrieved to check; if that too answers 404, or the list had none, the
// run fails with an error naming the URL that answered 404. A wrong
// api_url, or a proxy answering 404 to everything, is thus never taken
// for a provider that lost every object. (This rule needs no knowledge of
// each provider's not-found body, which a proxy could not fake but which
// payhook would have to keep up to date for every provider.)
//
// Retrieves are capped per run by Config.MaxRetrieves
// (DefaultMaxRetrieves, 1000): payments first, then subscriptions. The
// rest are not retrieved: counted by kind in Report.Unchecked and logged,
// neither compared nor reported, so that their open differences stay
// open until a run checks them. The retrieve that checks a kind's 404s is
// not counted.
//
// Backfill records each run in payhook_reconcile_runs, so that a run cut
// short is resumed from its cursor. Listed events carry no signature:
// they are trusted through the API key, and stored with received_via =
// backfill.
package reconcile
