package metrics

import (
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Live window sizes.
const (
	// LiveSeconds is how many seconds of per-voucher counts Live keeps.
	LiveSeconds = 300
	// maxLiveVouchers bounds the vouchers Live counts at once; the Sampler
	// drops those it no longer watches.
	maxLiveVouchers = 256
	// latencyWindow is how many seconds the order route's percentiles
	// cover.
	latencyWindow = 60
)

// Live keeps this instance's recent order outcomes per voucher, one slot
// per second, and the order route's latency over the last seconds: the
// per-second figures the dashboard shows, which Prometheus counters only
// give after a query. It is safe for concurrent use.
type Live struct {
	now func() time.Time

	mu       sync.Mutex
	vouchers map[int64]*secondsRing
	lat      *hdrhistogram.WindowedHistogram
	latSec   int64 // the second lat.Current records
}

// secondsRing holds one voucher's outcome counts per second.
type secondsRing [LiveSeconds]struct {
	sec int64
	n   [10]uint32 // by index in Outcomes
}

// NewLive returns an empty Live on the clock now.
func NewLive(now func() time.Time) *Live {
	return &Live{now: now, vouchers: map[int64]*secondsRing{},
		lat: hdrhistogram.NewWindowed(latencyWindow, 1, time.Minute.Microseconds(), 2)}
}

// Count records one order attempt's outcome for the voucher. Attempts on
// vouchers past the bound (or id 0) are not kept.
func (l *Live) Count(voucherID int64, outcome string) {
	i, ok := outcomeIndex[outcome]
	if !ok || voucherID <= 0 {
		return
	}
	sec := l.now().Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.vouchers[voucherID]
	if r == nil {
		if len(l.vouchers) >= maxLiveVouchers {
			return
		}
		r = new(secondsRing)
		l.vouchers[voucherID] = r
	}
	s := &r[sec%LiveSeconds]
	if s.sec != sec {
		s.sec, s.n = sec, [10]uint32{}
	}
	s.n[i]++
}

// Keep forgets the vouchers not in ids.
func (l *Live) Keep(ids map[int64]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.vouchers {
		if !ids[id] {
			delete(l.vouchers, id)
		}
	}
}

// Second is one second of a voucher's order outcomes, by outcome.
type Second struct {
	Time     int64          `json:"t"` // Unix seconds
	Accepted int            `json:"accepted"`
	Refused  map[string]int `json:"refused,omitempty"`
}

// Seconds returns the voucher's last n complete seconds, oldest first
// (seconds without attempts included, at zero).
func (l *Live) Seconds(voucherID int64, n int) []Second {
	n = min(n, LiveSeconds-1)
	end := l.now().Unix() // the current second is not complete
	out := make([]Second, 0, n)
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.vouchers[voucherID]
	for sec := end - int64(n); sec < end; sec++ {
		s := Second{Time: sec}
		if r != nil && r[sec%LiveSeconds].sec == sec {
			for i, c := range r[sec%LiveSeconds].n {
				if i == 0 {
					s.Accepted = int(c)
				} else if c > 0 {
					if s.Refused == nil {
						s.Refused = map[string]int{}
					}
					s.Refused[Outcomes[i]] = int(c)
				}
			}
		}
		out = append(out, s)
	}
	return out
}

// Latency records the time one order request took.
func (l *Live) Latency(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rotate()
	_ = l.lat.Current.RecordValue(min(d, time.Minute).Microseconds()) // clamped into range
}

// rotate moves the latency window to the current second.
func (l *Live) rotate() {
	sec := l.now().Unix()
	for i := l.latSec; i < sec && i < l.latSec+latencyWindow; i++ {
		l.lat.Rotate()
	}
	l.latSec = max(l.latSec, sec)
}

// Percentiles returns the order route's p50 and p99 in milliseconds over
// the last latencyWindow seconds, and how many requests they cover.
func (l *Live) Percentiles() (p50, p99 float64, count int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rotate()
	h := l.lat.Merge()
	return float64(h.ValueAtQuantile(50)) / 1000, float64(h.ValueAtQuantile(99)) / 1000, h.TotalCount()
}
