package metrics

import (
	"sync"
	"time"
)

// Live window sizes.
const (
	// LiveSeconds is how many seconds of per-voucher counts Live keeps.
	LiveSeconds = 300
	// maxLiveVouchers bounds the vouchers Live counts at once; the Sampler
	// drops those it no longer watches.
	maxLiveVouchers = 256
)

// Live keeps this instance's recent order outcomes per voucher, one slot
// per second, and each voucher's order latency over the last minute: the
// per-second figures the dashboard shows, which Prometheus counters only
// give after a query. It is safe for concurrent use.
type Live struct {
	now func() time.Time

	mu       sync.Mutex
	vouchers map[int64]*liveVoucher
}

// liveVoucher is one voucher's recent figures (about 24 kB).
type liveVoucher struct {
	seconds secondsRing
	latency latencyRing
}

// secondsRing holds one voucher's outcome counts per second.
type secondsRing [LiveSeconds]struct {
	sec int64
	n   [len(outcomes)]uint32 // by index in Outcomes
}

// NewLive returns an empty Live on the clock now.
func NewLive(now func() time.Time) *Live {
	return &Live{now: now, vouchers: map[int64]*liveVoucher{}}
}

// voucher returns the voucher's figures, made on first use; nil for id 0
// or a voucher past the bound. l.mu must be held.
func (l *Live) voucher(id int64) *liveVoucher {
	v := l.vouchers[id]
	if v == nil && id > 0 && len(l.vouchers) < maxLiveVouchers {
		v = new(liveVoucher)
		l.vouchers[id] = v
	}
	return v
}

// Count records one order attempt's outcome for the voucher. Attempts on
// vouchers past the bound (or id 0) are not kept.
func (l *Live) Count(voucherID int64, outcome string) {
	i, ok := outcomeIndex[outcome]
	if !ok {
		return
	}
	sec := l.now().Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.voucher(voucherID)
	if v == nil {
		return
	}
	s := &v.seconds[sec%LiveSeconds]
	if s.sec != sec {
		s.sec, s.n = sec, [len(outcomes)]uint32{}
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
	var r *secondsRing
	if v := l.vouchers[voucherID]; v != nil {
		r = &v.seconds
	}
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

// Latency records the time one order request for the voucher took.
// Requests on vouchers past the bound (or id 0) are not kept.
func (l *Live) Latency(voucherID int64, d time.Duration) {
	sec := l.now().Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	if v := l.voucher(voucherID); v != nil {
		v.latency.record(sec, d)
	}
}

// Percentiles returns the p50 and p99 in milliseconds of the voucher's
// order requests over the last minute (within 6.25%), and how many
// requests they cover; 0s without any.
func (l *Live) Percentiles(voucherID int64) (p50, p99 float64, count int64) {
	sec := l.now().Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.vouchers[voucherID]
	if v == nil {
		return 0, 0, 0
	}
	return v.latency.percentiles(sec)
}
