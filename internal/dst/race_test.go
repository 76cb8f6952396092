//go:build race

package dst

// raceEnabled: under the race detector a run costs ~8 times its CPU
// (with modernc's SQLite left uninstrumented, as scripts/test.sh does),
// so the default seed counts shrink to keep the suite's budget.
const raceEnabled = true
