// Package dst is payhook's deterministic simulation (issue 13): the
// simulated provider and payhook's pipeline (receiver, batches of the
// group commit, the job queue, billing, backfill) in one process, driven
// step by step by one seed, with the faults the seed chooses (crashes at a
// chosen statement, failing statements and commits, a skewed provider
// clock, provider API errors, duplicates, bursts, reordering, drops), and
// the invariants checked after every run and at every crash. Even seeds
// give the source API credentials (each event processed alone, reading
// the provider's current state); odd ones do not (events applied from
// their payloads, in batches, as payhook serve does by default, and on
// SQLite alone their jobs run every 10-40 simulated seconds, so that a
// batch takes several).
//
// It is all tests: go test ./internal/dst -run DST -seeds N (or -seed S);
// a failing seed prints the command that replays it. See
// docs/reliability.md.
package dst
