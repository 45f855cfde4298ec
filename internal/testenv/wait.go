package testenv

import (
	"context"
	"testing"
	"time"
)

// waitFor polls check until it returns nil, failing the test with what
// the last check said and logs() when timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, check func(context.Context) error, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: waited %v for %s: %v\n%s", timeout, what, err, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
