package bench

import (
	"testing"
	"time"
)

// TestContendedHarness runs the multi-process harness briefly for one peer
// and checks that what comes back adds up.
func TestContendedHarness(t *testing.T) {
	s := contended(t, "redislock", []int{2, 2, 2}, time.Second)
	t.Logf("%d acquisitions, %d retries, p50 %v, p99 %v, fairness %.3f", s.Acquisitions, s.Retries, s.P50, s.P99, s.Fairness)
	if s.Processes != 3 || len(s.Counts) != 6 {
		t.Fatalf("Processes, goroutines = %d, %d, want 3, 6", s.Processes, len(s.Counts))
	}
	if s.Acquisitions == 0 {
		t.Fatal("no acquisitions in a second")
	}
	if int64(s.Holds) != s.Acquisitions {
		t.Errorf("Holds = %d, want one per acquisition (%d)", s.Holds, s.Acquisitions)
	}
	if s.Fairness <= 0 || s.Fairness > 1 {
		t.Errorf("Fairness = %v, want in (0, 1]", s.Fairness)
	}
	if s.P50 <= 0 || s.P50 > s.P99 {
		t.Errorf("P50, P99 = %v, %v, want 0 < p50 ≤ p99", s.P50, s.P99)
	}
	if s.Violations != 0 {
		t.Errorf("Violations = %d, want 0", s.Violations)
	}
}

// TestContendedHarnessCatchesOverlap runs the harness on a lock that
// excludes nothing: the violation detector must see it on real samples.
func TestContendedHarnessCatchesOverlap(t *testing.T) {
	s := contended(t, noLock.name, []int{2, 2, 2}, time.Second)
	if s.Acquisitions == 0 {
		t.Fatal("no acquisitions in a second")
	}
	t.Logf("%d violations in %d holds", s.Violations, s.Holds)
	if s.Violations == 0 {
		t.Errorf("no violations in %d holds of a lock that excludes nothing", s.Holds)
	}
}
