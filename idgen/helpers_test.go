package idgen

import (
	"context"
	"log/slog"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// newGen returns a Generator on the test's prefix that logs to the test
// output and is closed when the test ends.
func newGen(t testing.TB, c rueidis.Client, prefix, name string, opts ...Option) *Generator {
	t.Helper()
	opts = append([]Option{WithPrefix(prefix), WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))}, opts...)
	g := New(c, name, opts...)
	t.Cleanup(g.Close)
	return g
}

// newClient returns another client of the test Redis, as a separate
// process would have.
func newClient(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		t.Fatalf("connecting to Redis: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// take returns n IDs from g, failing the test on an error.
func take(t testing.TB, g *Generator, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		id, err := g.NextID(context.Background())
		if err != nil {
			t.Fatalf("NextID after %d ids: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

// checkIncreasing fails the test if ids are not strictly increasing.
func checkIncreasing(t testing.TB, what string, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("%s: id %d (%d) is not above the one before (%d)", what, i, ids[i], ids[i-1])
		}
	}
}

// checkUnique fails the test if any ID appears twice across all lists, and
// returns how many IDs there were.
func checkUnique(t testing.TB, lists ...[]int64) int {
	t.Helper()
	seen := make(map[int64]bool)
	for _, ids := range lists {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("id %d was handed out twice", id)
			}
			seen[id] = true
		}
	}
	return len(seen)
}

// settle waits until g has no fetch in flight, so its prefetched range, if
// any, is in place.
func settle(g *Generator) {
	for {
		g.mu.Lock()
		fetching, done := g.fetching, g.done
		g.mu.Unlock()
		if !fetching {
			return
		}
		<-done
	}
}

// redisSecond returns Redis's clock in seconds since DefaultEpoch.
func redisSecond(c rueidis.Client) (int64, error) {
	v, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	if err != nil {
		return 0, err
	}
	return v[0] - DefaultEpoch.Unix(), nil
}
