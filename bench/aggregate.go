package bench

import (
	"cmp"
	"slices"
	"time"
)

// summary is a contended run aggregated over all worker processes.
type summary struct {
	Processes    int
	Counts       []int64 // acquisitions per goroutine, all processes
	Acquisitions int64
	Retries      int64
	PerSecond    float64 // acquisitions per second of the run
	P50, P99     time.Duration
	Fairness     float64 // Jain's index over Counts
	Holds        int     // hold intervals recorded
	Violations   int     // hold intervals overlapping an earlier one
	Errors       []string
}

// aggregate merges the workers' results of a run that lasted d.
func aggregate(results []workerResult, d time.Duration) summary {
	s := summary{Processes: len(results)}
	var waits []int64
	var holds []interval
	for _, r := range results {
		s.Counts = append(s.Counts, r.Counts...)
		s.Retries += r.Retries
		waits = append(waits, r.Waits...)
		holds = append(holds, r.Holds...)
		s.Errors = append(s.Errors, r.Errors...)
	}
	for _, c := range s.Counts {
		s.Acquisitions += c
	}
	s.PerSecond = float64(s.Acquisitions) / d.Seconds()
	slices.Sort(waits)
	s.P50 = time.Duration(percentile(waits, 50))
	s.P99 = time.Duration(percentile(waits, 99))
	s.Fairness = jain(s.Counts)
	s.Holds = len(holds)
	s.Violations = violations(holds)
	return s
}

// jain returns Jain's fairness index (Σx)²/(n·Σx²) of xs: 1 when all are
// equal, 1/n when one takes everything. With nothing to share (no x, or all
// zero) it returns 0 rather than NaN.
func jain(xs []int64) float64 {
	var sum, sumSq float64
	for _, x := range xs {
		sum += float64(x)
		sumSq += float64(x) * float64(x)
	}
	if sumSq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sumSq)
}

// violations counts the intervals that start before an earlier-starting
// one has ended: with a correct lock there are none. It compares with the
// latest end so far, not just the previous interval's, so an interval
// nested in a long one is caught too. Touching intervals (start == end) do
// not count: the clock is read before the release and after the acquire.
func violations(holds []interval) int {
	sorted := slices.Clone(holds)
	slices.SortFunc(sorted, func(a, b interval) int { return cmp.Compare(a.Start, b.Start) })
	n := 0
	var maxEnd int64
	for i, h := range sorted {
		if i > 0 && h.Start < maxEnd {
			n++
		}
		maxEnd = max(maxEnd, h.End)
	}
	return n
}

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted samples, 0 for none. The rank ⌈n·p/100⌉ is computed in integers,
// so 99 of 100 samples is exactly the 99th, not a float rounding away.
func percentile(sorted []int64, p int) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100
	return sorted[min(max(rank, 1), len(sorted))-1]
}
