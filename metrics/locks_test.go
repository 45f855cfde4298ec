package metrics

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lock"
)

// TestWatchLocks has 8 goroutines take a lock on real Redis 5 times each
// and checks the scrape: 40 acquisitions, turns and local handoffs adding
// up to them, and 40 waits in flashsale_lock_wait_seconds.
func TestWatchLocks(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	c := lock.New(rc, lock.WithPrefix(prefix))
	defer c.Close()
	m := New("lock")
	m.WatchLocks(c)
	mu := c.Mutex("metrics")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				l, err := mu.Lock(ctx)
				cancel()
				if err != nil {
					t.Error(err)
					return
				}
				if err := l.Unlock(context.Background()); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	s := c.Stats()
	if s.Acquired != 40 || s.Turns+s.LocalHandoffs != 40 {
		t.Fatalf("stats %+v, want 40 acquisitions", s)
	}
	want := `
# HELP flashsale_lock_acquisitions_total Locks obtained (re-entries not counted).
# TYPE flashsale_lock_acquisitions_total counter
flashsale_lock_acquisitions_total 40
# HELP flashsale_lock_lost_total Locks lost while held (lease gone or taken over).
# TYPE flashsale_lock_lost_total counter
flashsale_lock_lost_total 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"flashsale_lock_acquisitions_total", "flashsale_lock_lost_total"); err != nil {
		t.Error(err)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		if f.GetName() != "flashsale_lock_wait_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		found = true
		if h.GetSampleCount() != 40 || h.GetSampleSum() <= 0 || len(h.GetBucket()) != len(lock.WaitBuckets) {
			t.Errorf("flashsale_lock_wait_seconds: %v", h)
		}
		if last := h.GetBucket()[len(lock.WaitBuckets)-1]; last.GetCumulativeCount() > 40 {
			t.Errorf("last bucket %v holds more than the 40 waits", last)
		}
	}
	if !found {
		t.Error("no flashsale_lock_wait_seconds in the scrape")
	}
	if problems, err := testutil.GatherAndLint(m.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}
