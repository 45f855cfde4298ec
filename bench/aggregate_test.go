package bench

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestJain(t *testing.T) {
	tests := []struct {
		name   string
		counts []int64
		want   float64
	}{
		{"all equal", []int64{5, 5, 5, 5}, 1},
		{"one takes all of four", []int64{0, 0, 9, 0}, 0.25},
		{"uneven", []int64{3, 1, 2}, 36.0 / 42.0}, // 6² / (3·14)
		{"single goroutine", []int64{7}, 1},
		{"no acquisitions", []int64{0, 0}, 0},
		{"no goroutines", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jain(tt.counts); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("jain(%v) = %v, want %v", tt.counts, got, tt.want)
			}
		})
	}
}

func TestViolations(t *testing.T) {
	tests := []struct {
		name  string
		holds []interval
		want  int
	}{
		{"none", nil, 0},
		{"disjoint", []interval{{0, 10}, {11, 20}, {25, 30}}, 0},
		{"touching is not overlapping", []interval{{0, 10}, {10, 20}}, 0},
		{"one overlap", []interval{{0, 10}, {9, 20}, {21, 30}}, 1},
		{"one overlap, unsorted input", []interval{{21, 30}, {9, 20}, {0, 10}}, 1},
		{"nested in a long hold", []interval{{0, 100}, {10, 20}, {30, 40}}, 2},
		{"same start", []interval{{5, 6}, {5, 7}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := violations(tt.holds); got != tt.want {
				t.Errorf("violations(%v) = %d, want %d", tt.holds, got, tt.want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []int64
		p      int
		want   int64
	}{
		{"p50 of 1..100", hundred, 50, 50},
		{"p99 of 1..100", hundred, 99, 99},
		{"p100 of 1..100", hundred, 100, 100},
		{"p99 of one sample", []int64{42}, 99, 42},
		{"p50 of three", []int64{1, 2, 3}, 50, 2},
		{"no samples", nil, 50, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(p%d) = %d, want %d", tt.p, got, tt.want)
			}
		})
	}
}

// TestAggregate merges crafted worker results, one overlap among them.
func TestAggregate(t *testing.T) {
	ms := int64(time.Millisecond)
	results := []workerResult{
		{
			Counts:  []int64{3, 1},
			Retries: 2,
			Waits:   []int64{4 * ms, 1 * ms, 2 * ms, 3 * ms},
			Holds:   []interval{{0, 10}, {20, 30}, {40, 50}, {60, 70}},
		},
		{
			Counts: []int64{2},
			Waits:  []int64{5 * ms, 6 * ms},
			Holds:  []interval{{25, 35}, {80, 90}}, // {25,35} overlaps {20,30}
			Errors: []string{"unlock: boom"},
		},
	}
	s := aggregate(results, 2*time.Second)
	if s.Processes != 2 {
		t.Errorf("Processes = %d, want 2", s.Processes)
	}
	if s.Acquisitions != 6 || s.Holds != 6 {
		t.Errorf("Acquisitions, Holds = %d, %d, want 6, 6", s.Acquisitions, s.Holds)
	}
	if s.Retries != 2 {
		t.Errorf("Retries = %d, want 2", s.Retries)
	}
	if s.PerSecond != 3 {
		t.Errorf("PerSecond = %v, want 3", s.PerSecond)
	}
	if s.P50 != 3*time.Millisecond || s.P99 != 6*time.Millisecond {
		t.Errorf("P50, P99 = %v, %v, want 3ms, 6ms", s.P50, s.P99)
	}
	if want := 36.0 / 42.0; math.Abs(s.Fairness-want) > 1e-12 {
		t.Errorf("Fairness = %v, want %v", s.Fairness, want)
	}
	if s.Violations != 1 {
		t.Errorf("Violations = %d, want 1", s.Violations)
	}
	if len(s.Errors) != 1 {
		t.Errorf("Errors = %q, want the one worker error", s.Errors)
	}
}

// TestWorkerConfigEnv checks that a worker reads back what the parent set.
func TestWorkerConfigEnv(t *testing.T) {
	want := workerConfig{
		Library: "redsync", Prefix: "bench:abc:redsync:", Key: "contended", Goroutines: 22,
		Start: time.Unix(0, 1700000000123456789), Duration: 5 * time.Second, Out: "/tmp/w.json",
	}
	env := map[string]string{}
	for _, kv := range want.env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got, ok, err := workerConfigFromEnv(func(k string) string { return env[k] })
	if err != nil || !ok {
		t.Fatalf("workerConfigFromEnv = _, %v, %v", ok, err)
	}
	if !got.Start.Equal(want.Start) {
		t.Errorf("Start = %v, want %v", got.Start, want.Start)
	}
	got.Start = want.Start
	if got != want {
		t.Errorf("config = %+v, want %+v", got, want)
	}
	if _, ok, _ := workerConfigFromEnv(func(string) string { return "" }); ok {
		t.Error("an empty environment reads as a worker")
	}
}
