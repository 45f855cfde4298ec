package lab_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lab"
)

func intp(n int) *int { return &n }

// TestCheck audits crafted outcomes: every fault it is shown must be
// counted, and a clean sale must come out clean.
func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		in    lab.Evidence
		want  lab.Findings
		exact bool
	}{
		{
			name: "clean sell-out",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12, 13},
				TurnedAway:  []int64{1, 4, 5},
				DB:          flashsale.Audit{Stock: 3, Remaining: 0, Orders: 3, Units: 3, DistinctBuyers: 3},
				OrderIDs:    []int64{11, 12, 13},
				OrderUsers:  []int64{1, 2, 3},
			},
			want:  lab.Findings{Orders: 3, DistinctBuyers: 3},
			exact: true,
		},
		{
			name: "clean async sale with stock left and nobody refused",
			in: lab.Evidence{
				AcceptedIDs:    []int64{11, 12},
				DB:             flashsale.Audit{Stock: 5, Remaining: 3, Orders: 2, Units: 2, DistinctBuyers: 2},
				OrderIDs:       []int64{11, 12},
				OrderUsers:     []int64{1, 2},
				RemainingRedis: intp(3),
			},
			want:  lab.Findings{Orders: 2, DistinctBuyers: 2, RemainingDB: 3, RemainingRedis: intp(3)},
			exact: true,
		},
		{
			name: "oversell with lost updates",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12, 13, 14, 15},
				DB:          flashsale.Audit{Stock: 3, Remaining: 1, Orders: 5, Units: 5, DistinctBuyers: 5},
				OrderIDs:    []int64{11, 12, 13, 14, 15},
				OrderUsers:  []int64{1, 2, 3, 4, 5},
			},
			want: lab.Findings{Orders: 5, DistinctBuyers: 5, RemainingDB: 1, Oversold: 2, StockDrift: -3},
		},
		{
			name: "a duplicate buyer",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12, 13},
				DB:          flashsale.Audit{Stock: 3, Remaining: 0, Orders: 3, Units: 3, DistinctBuyers: 2, DuplicateBuyers: 1},
				OrderIDs:    []int64{11, 12, 13},
				OrderUsers:  []int64{1, 1, 2},
			},
			want: lab.Findings{Orders: 3, DistinctBuyers: 2, DuplicateBuyers: 1},
		},
		{
			name: "a lost order",
			in: lab.Evidence{
				AcceptedIDs:    []int64{11, 12, 99},
				DB:             flashsale.Audit{Stock: 3, Remaining: 1, Orders: 2, Units: 2, DistinctBuyers: 2},
				OrderIDs:       []int64{11, 12},
				OrderUsers:     []int64{1, 2},
				RemainingRedis: intp(0),
			},
			want: lab.Findings{Orders: 2, DistinctBuyers: 2, RemainingDB: 1, RemainingRedis: intp(0), Lost: 1},
		},
		{
			name: "undersold: capped by the stock left",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12},
				// Buyer 2 was refused once and then got an order: not unserved.
				TurnedAway: []int64{2, 3, 4, 5, 6, 7},
				DB:         flashsale.Audit{Stock: 5, Remaining: 3, Orders: 2, Units: 2, DistinctBuyers: 2},
				OrderIDs:   []int64{11, 12},
				OrderUsers: []int64{1, 2},
			},
			want: lab.Findings{Orders: 2, DistinctBuyers: 2, RemainingDB: 3, Undersold: 3},
		},
		{
			name: "undersold: capped by the buyers refused",
			in: lab.Evidence{
				AcceptedIDs: []int64{11},
				TurnedAway:  []int64{1, 2, 3},
				DB:          flashsale.Audit{Stock: 10, Remaining: 9, Orders: 1, Units: 1, DistinctBuyers: 1},
				OrderIDs:    []int64{11},
				OrderUsers:  []int64{1},
			},
			want: lab.Findings{Orders: 1, DistinctBuyers: 1, RemainingDB: 9, Undersold: 2},
		},
		{
			// The gate refused the rest rightly (Redis is sold out); the
			// unit MySQL still shows is the lost order's, not unsold.
			name: "a lost order is not also undersold",
			in: lab.Evidence{
				AcceptedIDs:    []int64{11, 12, 99},
				TurnedAway:     []int64{4, 5},
				DB:             flashsale.Audit{Stock: 3, Remaining: 1, Orders: 2, Units: 2, DistinctBuyers: 2},
				OrderIDs:       []int64{11, 12},
				OrderUsers:     []int64{1, 2},
				RemainingRedis: intp(0),
			},
			want: lab.Findings{Orders: 2, DistinctBuyers: 2, RemainingDB: 1, RemainingRedis: intp(0), Lost: 1},
		},
		{
			// The same without Redis (a synchronous strategy): the unit
			// MySQL shows is still the lost order's.
			name: "a lost order of a synchronous strategy is not also undersold",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12, 99},
				TurnedAway:  []int64{4, 5},
				DB:          flashsale.Audit{Stock: 3, Remaining: 1, Orders: 2, Units: 2, DistinctBuyers: 2},
				OrderIDs:    []int64{11, 12},
				OrderUsers:  []int64{1, 2},
			},
			want: lab.Findings{Orders: 2, DistinctBuyers: 2, RemainingDB: 1, Lost: 1},
		},
		{
			// Lost updates leave remaining at 1 after 5 orders of 3: that
			// unit is drift, not stock a buyer could have had.
			name: "an oversell is not also undersold",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12, 13, 14, 15},
				TurnedAway:  []int64{6, 7},
				DB:          flashsale.Audit{Stock: 3, Remaining: 1, Orders: 5, Units: 5, DistinctBuyers: 5},
				OrderIDs:    []int64{11, 12, 13, 14, 15},
				OrderUsers:  []int64{1, 2, 3, 4, 5},
			},
			want: lab.Findings{Orders: 5, DistinctBuyers: 5, RemainingDB: 1, Oversold: 2, StockDrift: -3},
		},
		{
			name: "undersold: buyers left without an answer count",
			in: lab.Evidence{
				AcceptedIDs: []int64{11},
				TurnedAway:  []int64{2, 3}, // timed out, never refused
				DB:          flashsale.Audit{Stock: 5, Remaining: 4, Orders: 1, Units: 1, DistinctBuyers: 1},
				OrderIDs:    []int64{11},
				OrderUsers:  []int64{1},
			},
			want: lab.Findings{Orders: 1, DistinctBuyers: 1, RemainingDB: 4, Undersold: 2},
		},
		{
			name: "stock taken without an order",
			in: lab.Evidence{
				AcceptedIDs: []int64{11},
				DB:          flashsale.Audit{Stock: 3, Remaining: 0, Orders: 1, Units: 1, DistinctBuyers: 1},
				OrderIDs:    []int64{11},
				OrderUsers:  []int64{1},
			},
			want: lab.Findings{Orders: 1, DistinctBuyers: 1, StockDrift: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := lab.Check(tt.in)
			if !sameFindings(got, tt.want) {
				t.Errorf("Check = %s, want %s", show(got), show(tt.want))
			}
			if got.Exact() != tt.exact {
				t.Errorf("Exact() = %v, want %v", got.Exact(), tt.exact)
			}
		})
	}
}

func sameFindings(a, b lab.Findings) bool {
	ra, rb := a.RemainingRedis, b.RemainingRedis
	a.RemainingRedis, b.RemainingRedis = nil, nil
	return a == b && (ra == nil) == (rb == nil) && (ra == nil || *ra == *rb)
}

func show(f lab.Findings) string {
	redis := "nil"
	if f.RemainingRedis != nil {
		redis = strconv.Itoa(*f.RemainingRedis)
	}
	f.RemainingRedis = nil
	return fmt.Sprintf("%+v (remaining redis %s)", f, redis)
}
