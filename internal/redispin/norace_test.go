//go:build !race

package redispin_test

// raceEnabled reports whether this test binary was built with -race.
const raceEnabled = false
