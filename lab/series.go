package lab

import "time"

// Series are a run's answers over time and its latency distribution, from
// the answers the Load recorded.
type Series struct {
	// Throughput counts the answered requests in each second of the run,
	// from its start.
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
	s := Series{Throughput: res.PerSecond, Latency: make([]LatencyPoint, 0, len(percentiles))}
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

// countSecond counts an answer in the second of the run it arrived in.
// The caller holds r.mu.
func (r *recorder) countSecond() {
	i := int(time.Since(r.start) / time.Second)
	for len(r.res.PerSecond) <= i {
		r.res.PerSecond = append(r.res.PerSecond, 0)
	}
	r.res.PerSecond[i]++
}
