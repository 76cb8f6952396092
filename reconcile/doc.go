// Package reconcile finds what webhooks never brought: Backfill lists the
// provider's events and stores the missing ones through the receiver's
// path; Reconcile lists the provider's recent objects (payments, refunds,
// disputes, subscriptions) and compares them with payhook's billing
// state. Neither corrects money silently: Reconcile reports each
// difference, raises one alert per difference and says which events
// would correct it; a backfill or a replay corrects through the normal
// path.
//
// Backfill records each run in payhook_reconcile_runs, so that a run cut
// short is resumed from its cursor. Listed events carry no signature:
// they are trusted through the API key, and stored with received_via =
// backfill.
package reconcile
