package lab_test

import (
	"slices"
	"testing"

	"github.com/flashsale/flashsale/lab"
)

// TestPlanSpreadsAttemptsOverBuyers checks that every buyer gets its share
// of the attempts, that double clicks appear, and that a seed fixes the
// plan.
func TestPlanSpreadsAttemptsOverBuyers(t *testing.T) {
	shots, err := lab.Plan(100, 310, 0.25, 9)
	if err != nil {
		t.Fatal(err)
	}
	perUser := map[int64]int{}
	doubles := 0
	for _, s := range shots {
		perUser[s.User] += s.Clicks
		if s.Clicks == 2 {
			doubles++
		}
	}
	for u := int64(1); u <= 100; u++ {
		want := 3
		if u <= 10 {
			want = 4 // 310 = 3×100 + 10: the first ten get one more
		}
		if perUser[u] != want {
			t.Errorf("user %d has %d attempts, want %d", u, perUser[u], want)
		}
	}
	if len(perUser) != 100 || doubles == 0 || doubles == len(shots) {
		t.Errorf("%d buyers, %d double clicks of %d shots; want 100 buyers and some, not all, double clicks", len(perUser), doubles, len(shots))
	}
	again, _ := lab.Plan(100, 310, 0.25, 9)
	other, _ := lab.Plan(100, 310, 0.25, 10)
	if !slices.Equal(shots, again) || slices.Equal(shots, other) {
		t.Error("the same seed must give the same plan and another seed another one")
	}
}

// TestPlanRejectsBadSizes checks the plan's preconditions.
func TestPlanRejectsBadSizes(t *testing.T) {
	tests := []struct {
		name            string
		users, requests int
		doubles         float64
	}{
		{"no users", 0, 10, 0},
		{"fewer requests than users", 10, 9, 0},
		{"negative double-click chance", 10, 10, -0.1},
		{"double-click chance above one", 10, 10, 1.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := lab.Plan(tt.users, tt.requests, tt.doubles, 1); err == nil {
				t.Errorf("Plan(%d, %d, %g) succeeded, want an error", tt.users, tt.requests, tt.doubles)
			}
		})
	}
}

// TestQuantities: a seed fixes the quantities, each within 1..most, all of
// them drawn; most 1 leaves the shots without one (no body).
func TestQuantities(t *testing.T) {
	draw := func(most int) []lab.Shot {
		shots, err := lab.Plan(50, 200, 0.25, 3)
		if err != nil {
			t.Fatal(err)
		}
		lab.Quantities(shots, most, 3)
		return shots
	}
	seen := map[int]bool{}
	for _, s := range draw(3) {
		if s.Quantity < 1 || s.Quantity > 3 || s.Units() != s.Quantity {
			t.Fatalf("shot %+v, want a quantity of 1 to 3", s)
		}
		seen[s.Quantity] = true
	}
	if len(seen) != 3 || !slices.Equal(draw(3), draw(3)) {
		t.Errorf("quantities seen %v, want 1, 2 and 3, the same for the same seed", seen)
	}
	for _, s := range draw(1) {
		if s.Quantity != 0 || s.Units() != 1 {
			t.Fatalf("shot %+v with --quantity-max 1, want no quantity", s)
		}
	}
}
