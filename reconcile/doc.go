// Package reconcile finds what webhooks never brought: Backfill lists the
// provider's events and stores the missing ones through the receiver's
// path; Reconcile lists the provider's recent objects (payments, refunds,
// disputes, subscriptions) and compares them with payhook's billing
// state. Neither corrects money silently: Reconcile reports each
// difference, raises one alert per difference and says which events
// would correct it; a backfill or a replay corrects through the normal
// path.
package reconcile
