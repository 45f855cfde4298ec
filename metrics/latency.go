package metrics

import (
	"math"
	"math/bits"
	"time"
)

// A voucher's order latencies are kept in a ring of latencySlots slots of
// latencySlot each, so its percentiles cover the last minute (55 to 60 s,
// by where the clock is in the current slot).
const (
	latencySlot  = 5 // seconds
	latencySlots = 12
)

// latencySub is how many bins each power of two of microseconds is cut
// into (a power of two itself): 8 keeps a value read back at its bin's
// middle within 1/16 (6.25%) of what was recorded.
const (
	latencySubBits = 3
	latencySub     = 1 << latencySubBits
)

// latencyBins is how many bins cover 0 µs to a minute (a test
// checks it against latencyBin).
const latencyBins = 191

// latencyHist counts latencies by bin: a histogram of fixed, small
// size (764 bytes), where hdrhistogram's of the same precision takes
// kilobytes, so that every watched voucher can keep a minute of its own.
type latencyHist [latencyBins]uint32

// latencyRing is one voucher's latencies, one histogram per slot.
type latencyRing [latencySlots]struct {
	slot int64 // Unix seconds / latencySlot
	h    latencyHist
}

// latencyBin returns the bin of a latency of us microseconds: the
// value itself below 2·latencySub, then latencySub bins per power of
// two.
func latencyBin(us int64) int {
	us = max(us, 0)
	if us < latencySub {
		return int(us)
	}
	shift := bits.Len64(uint64(us)) - 1 - latencySubBits
	return shift*latencySub + int(us>>shift) // us>>shift is in [latencySub, 2·latencySub)
}

// latencyBinMiddle returns the middle of bin i, in microseconds.
func latencyBinMiddle(i int) float64 {
	if i < 2*latencySub {
		return float64(i)
	}
	shift := i/latencySub - 1
	low := (i%latencySub + latencySub) << shift
	return float64(low) + float64(int(1)<<shift-1)/2
}

// record counts one latency.
func (r *latencyRing) record(sec int64, d time.Duration) {
	slot := sec / latencySlot
	s := &r[slot%latencySlots]
	if s.slot != slot {
		s.slot, s.h = slot, latencyHist{}
	}
	s.h[latencyBin(min(d, time.Minute).Microseconds())]++
}

// percentiles returns p50 and p99 in milliseconds over the ring's slots
// of the last minute, and how many latencies they cover; 0s without any.
func (r *latencyRing) percentiles(sec int64) (p50, p99 float64, count int64) {
	var sum latencyHist
	now := sec / latencySlot
	for i := range r {
		if s := &r[i]; s.slot > now-latencySlots && s.slot <= now {
			for b, n := range s.h {
				sum[b] += n
				count += int64(n)
			}
		}
	}
	if count == 0 {
		return 0, 0, 0
	}
	return sum.quantile(0.50, count) / 1000, sum.quantile(0.99, count) / 1000, count
}

// quantile returns the latency (µs) at quantile q of h, which holds count
// latencies: the middle of the bin that holds the ⌈q·count⌉th.
func (h *latencyHist) quantile(q float64, count int64) float64 {
	rank := max(int64(math.Ceil(q*float64(count))), 1)
	var seen int64
	for b, n := range h {
		if seen += int64(n); seen >= rank {
			return latencyBinMiddle(b)
		}
	}
	return latencyBinMiddle(len(h) - 1)
}
