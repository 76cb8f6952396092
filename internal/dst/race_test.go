//go:build race

package dst

// raceEnabled: under the race detector a run costs ~15 times its CPU
// (modernc's SQLite is Go, instrumented), so the default seed counts
// shrink to keep the suite's budget.
const raceEnabled = true
