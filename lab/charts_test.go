package lab

import (
	"slices"
	"testing"
)

// TestNiceTicks: an axis counts from 0 to the first tick at or past the
// top, in whole steps of 1, 2 or 5 times a power of ten.
func TestNiceTicks(t *testing.T) {
	tests := []struct {
		top  float64
		n    int
		want []float64
	}{
		{1002, 4, []float64{0, 500, 1000, 1500}}, // not 251, 501, 752, 1002
		{10411, 5, []float64{0, 5000, 10000, 15000}},
		{360, 4, []float64{0, 100, 200, 300, 400}},
		{3, 8, []float64{0, 1, 2, 3}}, // whole seconds
		{12, 8, []float64{0, 2, 4, 6, 8, 10, 12}},
		{0, 4, []float64{0, 1}},
	}
	for _, tt := range tests {
		if got := niceTicks(tt.top, tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("niceTicks(%g, %d) = %v, want %v", tt.top, tt.n, got, tt.want)
		}
	}
}
