package lab

import (
	"time"

	"github.com/flashsale/flashsale"
)

// Series are a run's answers over time and its latency distribution, from
// the answers the Load recorded.
type Series struct {
	// ElapsedMs is how long the run took; SoldOutMs when, from its
	// start, the first buyer was told sold_out (nil: none was).
	ElapsedMs float64  `json:"elapsed_ms"`
	SoldOutMs *float64 `json:"sold_out_ms"`
	// Throughput counts the answered requests in each second of the run,
	// from its start; the last second is cut short by the run's end.
	Throughput []int `json:"throughput"`
	// Latency is the latency distribution: the latency at each of a fixed
	// set of percentiles, from the run's HDR histogram.
	Latency []LatencyPoint `json:"latency"`
}

// LatencyPoint is the latency at one percentile.
type LatencyPoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// percentiles are the points of a Series' latency distribution.
var percentiles = []float64{0, 10, 25, 50, 75, 90, 95, 99, 99.9, 99.99, 100}

// seriesOf returns the Series of a Load's result.
func seriesOf(res *Result) Series {
	s := Series{ElapsedMs: ms(res.Elapsed), Throughput: res.PerSecond, Latency: make([]LatencyPoint, 0, len(percentiles))}
	if res.SoldOut > 0 {
		at := ms(res.SoldOut)
		s.SoldOutMs = &at
	}
	if s.Throughput == nil {
		s.Throughput = []int{}
	}
	if res.Latency == nil || res.Latency.TotalCount() == 0 {
		return s
	}
	for _, p := range percentiles {
		s.Latency = append(s.Latency, LatencyPoint{Percentile: p, Ms: round(float64(res.Latency.ValueAtQuantile(p))/1000, 3)})
	}
	return s
}

// ms is d in milliseconds, to a tenth.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 1) }

// countSecond counts an answer in the second of the run it arrived in,
// and notes when the first sold_out arrived. The caller holds r.mu.
func (r *recorder) countSecond(code string) {
	since := time.Since(r.start)
	if code == flashsale.ESoldOut && r.res.SoldOut == 0 {
		r.res.SoldOut = max(since, 1)
	}
	i := int(max(since, 0) / time.Second) // a Crowd's run counts from its start
	for len(r.res.PerSecond) <= i {
		r.res.PerSecond = append(r.res.PerSecond, 0)
	}
	r.res.PerSecond[i]++
}
