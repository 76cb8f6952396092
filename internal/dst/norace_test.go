//go:build !race

package dst

const raceEnabled = false
