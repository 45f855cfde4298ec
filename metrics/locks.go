package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/lock"
)

// WatchLocks exports the lock client's counters (lock.Stats), read at
// scrape time: acquisitions, turns, local handoffs and locks lost as
// counters, and Lock's waits as the histogram flashsale_lock_wait_seconds,
// on lock.WaitBuckets.
func (m *Metrics) WatchLocks(c *lock.Client) {
	m.reg.MustRegister(
		newCounterSet([]counterSpec{
			{"flashsale_lock_acquisitions_total", "Locks obtained (re-entries not counted)."},
			{"flashsale_lock_turns_total", "Acquisitions granted through Redis, each beginning a turn of this process."},
			{"flashsale_lock_local_handoffs_total", "Acquisitions handed over within a turn, without a Redis call."},
			{"flashsale_lock_lost_total", "Locks lost while held (lease gone or taken over)."},
		}, func() []uint64 {
			s := c.Stats()
			return []uint64{s.Acquired, s.Turns, s.LocalHandoffs, s.Lost}
		}),
		lockWaits{c},
	)
}

var descLockWait = prometheus.NewDesc("flashsale_lock_wait_seconds",
	"Time Lock calls that obtained a lock waited for it.", nil, nil)

// lockWaits exports lock.Stats.Wait as a Prometheus histogram.
type lockWaits struct{ c *lock.Client }

func (w lockWaits) Describe(ch chan<- *prometheus.Desc) { ch <- descLockWait }

func (w lockWaits) Collect(ch chan<- prometheus.Metric) {
	h := w.c.Stats().Wait
	buckets := make(map[float64]uint64, len(lock.WaitBuckets))
	var cum uint64
	for i, le := range lock.WaitBuckets {
		cum += h.Counts[i]
		buckets[le.Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(descLockWait, h.Count(), h.Sum.Seconds(), buckets)
}
