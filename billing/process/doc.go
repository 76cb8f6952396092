// Package process is what payhook serve runs on each stored event: the
// job queue's handler that reads the event with its provider's mapping
// (package mapping), lets the object fetched from the provider's API (its
// current state) stand for the one the event carried, applies the
// resulting billing facts in the
// transaction that marks the event processed, and raises an alert for an
// event that fails for good.
//
// An application that imports payhook mounts the same processing with
//
//	cfg, err := process.New(process.Config{DB: db, Sources: sources})
//	queue, err := jobs.New(db, cfg)
package process
