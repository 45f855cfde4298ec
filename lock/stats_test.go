package lock

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestStatsCount has 16 goroutines of two Clients contend for one lock,
// then loses a lock by deleting its key, and checks each Client's
// counters: every acquisition counted once, as a turn or a local handoff;
// every Lock's wait in the histogram, TryLock's not; re-entries not
// counted; the lost lock counted.
func TestStatsCount(t *testing.T) {
	a, rc, prefix := newTestClient(t)
	b := sibling(t, prefix)
	const perClient, rounds = 8, 10
	var wg sync.WaitGroup
	for _, c := range []*Client{a, b} {
		m := c.Mutex("stats")
		for range perClient {
			wg.Go(func() {
				for range rounds {
					l := mustLock(t, timeout(t, 30*time.Second), m)
					mustLock(t, l.Context(), m) // a re-entry: not an acquisition
					mustUnlock(t, l)
					mustUnlock(t, l)
				}
			})
		}
	}
	wg.Wait()
	for name, c := range map[string]*Client{"a": a, "b": b} {
		s := c.Stats()
		want := uint64(perClient * rounds)
		if s.Acquired != want || s.Turns+s.LocalHandoffs != want || s.Wait.Count() != want {
			t.Errorf("client %s: %+v, want %d acquisitions, turns + local handoffs and waits", name, s, want)
		}
		if s.Turns == 0 || s.Lost != 0 || s.Wait.Sum <= 0 {
			t.Errorf("client %s: %+v, want turns, no loss, some wait", name, s)
		}
	}
	if s := a.Stats(); s.LocalHandoffs+b.Stats().LocalHandoffs == 0 {
		t.Errorf("no local handoff in %d contended acquisitions", 2*perClient*rounds)
	}

	before := a.Stats()
	m := a.Mutex("stats-lost", WithWatchdog(300*time.Millisecond))
	l, err := m.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Do(context.Background(), rc.B().Del().Key(m.keyList[0]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("Lost() not closed after the lock key was deleted")
	}
	s := a.Stats()
	if s.Acquired != before.Acquired+1 || s.Turns != before.Turns+1 || s.Lost != 1 || s.Wait != before.Wait {
		t.Errorf("after a TryLock that was lost: %+v, before %+v", s, before)
	}
}

// TestWaitBuckets puts waits in their buckets: a wait equal to a bound
// belongs to that bound's bucket, one above every bound to the last.
func TestWaitBuckets(t *testing.T) {
	c := &Client{}
	for _, d := range []time.Duration{0, WaitBuckets[0], WaitBuckets[0] + 1, WaitBuckets[len(WaitBuckets)-1] + 1} {
		c.stats.waited(d)
	}
	h := c.Stats().Wait
	if h.Counts[0] != 2 || h.Counts[1] != 1 || h.Counts[len(WaitBuckets)] != 1 || h.Count() != 4 {
		t.Errorf("buckets: %v", h.Counts)
	}
	if want := 2*WaitBuckets[0] + 1 + WaitBuckets[len(WaitBuckets)-1] + 1; h.Sum != want {
		t.Errorf("sum %v, want %v", h.Sum, want)
	}
}
