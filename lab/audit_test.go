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
			want:  lab.Findings{Orders: 3, Units: 3, DistinctBuyers: 3},
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
			want:  lab.Findings{Orders: 2, Units: 2, DistinctBuyers: 2, RemainingDB: 3, RemainingRedis: intp(3)},
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
			want: lab.Findings{Orders: 5, Units: 5, DistinctBuyers: 5, RemainingDB: 1, Oversold: 2, StockDrift: -3},
		},
		{
			name: "a duplicate buyer",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12, 13},
				DB:          flashsale.Audit{Stock: 3, Remaining: 0, Orders: 3, Units: 3, DistinctBuyers: 2, DuplicateBuyers: 1},
				OrderIDs:    []int64{11, 12, 13},
				OrderUsers:  []int64{1, 1, 2},
			},
			want: lab.Findings{Orders: 3, Units: 3, DistinctBuyers: 2, DuplicateBuyers: 1},
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
			want: lab.Findings{Orders: 2, Units: 2, DistinctBuyers: 2, RemainingDB: 1, RemainingRedis: intp(0), Lost: 1},
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
			want: lab.Findings{Orders: 2, Units: 2, DistinctBuyers: 2, RemainingDB: 3, Undersold: 3},
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
			want: lab.Findings{Orders: 1, Units: 1, DistinctBuyers: 1, RemainingDB: 9, Undersold: 2},
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
			want: lab.Findings{Orders: 2, Units: 2, DistinctBuyers: 2, RemainingDB: 1, RemainingRedis: intp(0), Lost: 1},
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
			want: lab.Findings{Orders: 2, Units: 2, DistinctBuyers: 2, RemainingDB: 1, Lost: 1},
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
			want: lab.Findings{Orders: 5, Units: 5, DistinctBuyers: 5, RemainingDB: 1, Oversold: 2, StockDrift: -3},
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
			want: lab.Findings{Orders: 1, Units: 1, DistinctBuyers: 1, RemainingDB: 4, Undersold: 2},
		},
		{
			name: "quantities: a refused buyer counts the units he asked for, if they were left",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12},
				// 3 units left: buyer 5 asked for 2 and 6 for 3 (they could
				// have had them), 7 for 4 (he could not).
				TurnedAway:      []int64{5, 6, 7},
				TurnedAwayUnits: map[int64]int{5: 2, 6: 3, 7: 4},
				DB:              flashsale.Audit{Stock: 10, Remaining: 3, Orders: 2, Units: 7, DistinctBuyers: 2},
				OrderIDs:        []int64{11, 12},
				OrderUsers:      []int64{1, 2},
				MaxBuyerUnits:   4,
			},
			want: lab.Findings{Orders: 2, Units: 7, MaxBuyerUnits: 4, DistinctBuyers: 2, RemainingDB: 3, Undersold: 3},
		},
		{
			name: "quantities: units left that no refused buyer could take are not undersold",
			in: lab.Evidence{
				AcceptedIDs:     []int64{11},
				TurnedAway:      []int64{5},
				TurnedAwayUnits: map[int64]int{5: 3},
				DB:              flashsale.Audit{Stock: 10, Remaining: 2, Orders: 3, Units: 8, DistinctBuyers: 3},
				OrderIDs:        []int64{11},
				OrderUsers:      []int64{1},
			},
			want:  lab.Findings{Orders: 3, Units: 8, DistinctBuyers: 3, RemainingDB: 2},
			exact: true,
		},
		{
			name: "orders cancelled or expired are not lost; a failed one is",
			in: lab.Evidence{
				AcceptedIDs: []int64{11, 12, 13, 14},
				DB:          flashsale.Audit{Stock: 3, Remaining: 2, Orders: 1, Units: 1, DistinctBuyers: 1, Cancelled: 1, Expired: 1, ReturnedUnits: 2},
				OrderIDs:    []int64{11},
				OrderUsers:  []int64{1},
				Closed: []flashsale.Order{{ID: 12, Status: flashsale.StatusCancelled}, {ID: 13, Status: flashsale.StatusExpired},
					{ID: 14, Status: flashsale.StatusFailed}},
			},
			want: lab.Findings{Orders: 1, Units: 1, DistinctBuyers: 1, RemainingDB: 2, Lost: 1},
		},
		{
			name: "stock taken without an order",
			in: lab.Evidence{
				AcceptedIDs: []int64{11},
				DB:          flashsale.Audit{Stock: 3, Remaining: 0, Orders: 1, Units: 1, DistinctBuyers: 1},
				OrderIDs:    []int64{11},
				OrderUsers:  []int64{1},
			},
			want: lab.Findings{Orders: 1, Units: 1, DistinctBuyers: 1, StockDrift: 2},
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

// TestCheckLifecycle audits what became of the orders of sales with a
// payment window: the units returned and resold, and every way an order
// can be paid after it closed.
func TestCheckLifecycle(t *testing.T) {
	settled := func() lab.Evidence {
		return lab.Evidence{
			AcceptedIDs: []int64{11, 12, 13, 14, 15},
			// 5 units: 3 paid live (11, 14, 15), 12 cancelled, 13 expired and
			// their units resold to 14 and 15.
			DB:       flashsale.Audit{Stock: 3, Remaining: 0, Orders: 3, Units: 3, DistinctBuyers: 3, Paid: 3, Cancelled: 1, Expired: 1, ReturnedUnits: 2},
			OrderIDs: []int64{11, 14, 15}, OrderUsers: []int64{1, 4, 5}, MaxBuyerUnits: 1,
			Closed:    []flashsale.Order{{ID: 12, Status: flashsale.StatusCancelled}, {ID: 13, Status: flashsale.StatusExpired}},
			Buyers:    &lab.Lifecycle{Payments: 3, PaymentUnits: 3, Cancels: 1, Abandoned: 1, Refused: map[string]int{}, Ended: lab.EndedPaid},
			PaidIDs:   []int64{11, 14, 15},
			PaidUnits: 3,
		}
	}
	tests := []struct {
		name     string
		change   func(e *lab.Evidence)
		want     lab.Lifecycle // the figures from MySQL
		problems bool
	}{
		{"every unit paid, the returned ones resold", func(*lab.Evidence) {},
			lab.Lifecycle{PaidUnits: 3, Cancelled: 1, Expired: 1, ReturnedUnits: 2, Resold: 2}, false},
		{"an expired order carries a payment", func(e *lab.Evidence) { e.DB.PaidAfterClose = 1 },
			lab.Lifecycle{PaidUnits: 3, Cancelled: 1, Expired: 1, ReturnedUnits: 2, Resold: 2, PaidAfterClose: 1}, true},
		{"a payment answered 200 for an order that expired", func(e *lab.Evidence) {
			e.PaidIDs = append(e.PaidIDs, 13)
			e.Buyers.Payments, e.Buyers.PaymentUnits = 4, 4
		}, lab.Lifecycle{PaidUnits: 3, Cancelled: 1, Expired: 1, ReturnedUnits: 2, Resold: 2, PaidAfterClose: 1}, true},
		{"one counted by MySQL too is counted once", func(e *lab.Evidence) {
			e.PaidIDs = append(e.PaidIDs, 13)
			e.Closed[1].PaymentID = "lab-13"
			e.DB.PaidAfterClose = 1
			e.Buyers.Payments, e.Buyers.PaymentUnits = 4, 4
		}, lab.Lifecycle{PaidUnits: 3, Cancelled: 1, Expired: 1, ReturnedUnits: 2, Resold: 2, PaidAfterClose: 1}, true},
		{"the sale ended with a unit unpaid", func(e *lab.Evidence) {
			e.DB.Remaining, e.DB.Units, e.DB.Orders, e.PaidUnits = 1, 2, 2, 2
			e.OrderIDs, e.OrderUsers = []int64{11, 14}, []int64{1, 4}
			e.AcceptedIDs, e.PaidIDs = e.AcceptedIDs[:4], e.PaidIDs[:2]
			e.Buyers.Payments, e.Buyers.PaymentUnits, e.Buyers.Ended = 2, 2, lab.EndedSale
		}, lab.Lifecycle{PaidUnits: 2, Cancelled: 1, Expired: 1, ReturnedUnits: 2, Resold: 1, Unpaid: 1}, false},
		{"MySQL holds fewer paid units than the buyers paid", func(e *lab.Evidence) { e.PaidUnits = 2 },
			lab.Lifecycle{PaidUnits: 2, Cancelled: 1, Expired: 1, ReturnedUnits: 2, Resold: 2, Unpaid: 1}, true},
		{"a payment refused for a wrong signature", func(e *lab.Evidence) { e.Buyers.Refused["pay unauthorized"] = 1 },
			lab.Lifecycle{PaidUnits: 3, Cancelled: 1, Expired: 1, ReturnedUnits: 2, Resold: 2}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := settled()
			tt.change(&e)
			f := lab.Check(e)
			lc := f.Lifecycle
			if lc == nil {
				t.Fatal("no lifecycle")
			}
			got := lab.Lifecycle{PaidUnits: lc.PaidUnits, Cancelled: lc.Cancelled, Expired: lc.Expired, ReturnedUnits: lc.ReturnedUnits,
				Resold: lc.Resold, Unpaid: lc.Unpaid, PaidAfterClose: lc.PaidAfterClose}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("lifecycle %+v, want %+v", got, tt.want)
			}
			if f.Undersold != 0 || f.Lost != 0 || f.Exact() == tt.problems {
				t.Errorf("findings %s, exact %v; want no undersold, none lost, exact %v", show(f), f.Exact(), !tt.problems)
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
