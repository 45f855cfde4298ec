package metrics

import (
	"math"
	"testing"
	"time"
)

// TestLatencyBins checks that every latency from 0 to a minute falls in
// a bin whose middle is within 1/16 of it, that bins rise with the
// latency, and that a minute takes the last bin.
func TestLatencyBins(t *testing.T) {
	if got := latencyBin(time.Minute.Microseconds()); got != latencyBins-1 {
		t.Fatalf("a minute is in bin %d, want the last, %d", got, latencyBins-1)
	}
	prev := 0
	for us := int64(0); us <= time.Minute.Microseconds(); us += 1 + us/997 { // every value below ~1 ms, then ~0.1% steps
		b := latencyBin(us)
		if b < prev || b >= latencyBins {
			t.Fatalf("%d µs in bin %d, after %d (of %d)", us, b, prev, latencyBins)
		}
		prev = b
		if mid := latencyBinMiddle(b); math.Abs(mid-float64(us)) > float64(us)/16 {
			t.Fatalf("%d µs read back as %v, more than 1/16 off", us, mid)
		}
	}
	if latencyBin(-5) != 0 {
		t.Error("a negative latency is not in bin 0")
	}
}

// TestLivePercentiles records latencies per voucher on a clock the test
// moves: each voucher has its own percentiles, over the last minute only.
func TestLivePercentiles(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	l := NewLive(func() time.Time { return now })
	for i := range 100 {
		l.Latency(1, time.Duration(i+1)*time.Millisecond) // 1 to 100 ms
	}
	l.Latency(2, 3*time.Second)
	l.Latency(0, time.Second) // no voucher: not kept
	now = now.Add(30 * time.Second)
	l.Latency(2, 5*time.Second)
	tests := []struct {
		voucher  int64
		after    time.Duration
		p50, p99 float64
		n        int64
	}{
		{1, 0, 50, 99, 100},
		{2, 0, 3000, 5000, 2},
		{3, 0, 0, 0, 0},
		{1, 30 * time.Second, 0, 0, 0}, // a minute after voucher 1's requests
		{2, 0, 5000, 5000, 1},          // voucher 2's first request is past the minute now
	}
	for _, tt := range tests {
		now = now.Add(tt.after)
		p50, p99, n := l.Percentiles(tt.voucher)
		near := func(got, want float64) bool { return math.Abs(got-want) <= want/16 }
		if n != tt.n || !near(p50, tt.p50) || !near(p99, tt.p99) {
			t.Errorf("voucher %d at %v: p50 %v, p99 %v over %d; want %v, %v over %d", tt.voucher, now.Unix(), p50, p99, n, tt.p50, tt.p99, tt.n)
		}
	}
	l.Keep(map[int64]bool{1: true})
	if _, _, n := l.Percentiles(2); n != 0 {
		t.Errorf("Keep left voucher 2's latencies (%d)", n)
	}
}
