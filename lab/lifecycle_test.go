package lab_test

import (
	"context"
	"testing"
	"time"
)

// TestSaleWithAPaymentWindow runs sales with a two-second payment window
// (with one second, a loaded machine once answered every cancel of a
// conditional sale past its order's pay_by) on real instances (MySQL, Redis, two instances each with its expirer):
// buyers pay, cancel or abandon their orders, the buyers without one keep
// trying, and every unit ends paid, the cancelled and expired ones resold,
// none paid after close.
func TestSaleWithAPaymentWindow(t *testing.T) {
	tests := []struct {
		strategy              string
		shards, quantity, lim int
	}{
		{"conditional", 1, 1, 1},
		{"lock", 1, 1, 1},
		{"stocklock", 1, 1, 1},
		{"batch", 1, 1, 1},
		{"async", 1, 1, 1},
		{"async", 3, 2, 2}, // returns of two units, on the buyers' home shards
	}
	for _, tt := range tests {
		t.Run(tt.strategy, func(t *testing.T) {
			s := newShop(t, tt.strategy, 2)
			sale := s.sale(tt.strategy, 12, 60, 120)
			sale.Shards, sale.QuantityMax, sale.LimitPerBuyer = tt.shards, tt.quantity, tt.lim
			sale.PaymentWindow, sale.PayRatio, sale.CancelRatio, sale.SaleDuration = 2*time.Second, 0.6, 0.2, time.Minute
			row, err := sale.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			checkExact(t, row)
			lc := wantEnded(t, row)
			// Every unit is paid, so every unit returned was sold again.
			if lc.Cancelled == 0 || lc.Expired == 0 || lc.Resold != lc.ReturnedUnits || lc.ReturnedUnits < lc.Cancelled+lc.Expired ||
				lc.Waves == 0 || lc.Cancels != lc.Cancelled || lc.Abandoned == 0 {
				t.Errorf("lifecycle %+v; want orders cancelled and expired, their units resold in later waves", *lc)
			}
			if tt.strategy == "async" && (row.RemainingRedis == nil || *row.RemainingRedis != 0) {
				t.Errorf("left in redis %v, want 0", row.RemainingRedis)
			}
		})
	}
}

// TestSaleWithQuantitiesAndALimit sells orders of 1 to 3 units with a limit
// of 3 per buyer: the stock is sold exactly, to buyers holding at most 3.
func TestSaleWithQuantitiesAndALimit(t *testing.T) {
	for _, tt := range []struct {
		strategy string
		shards   int
	}{{"conditional", 1}, {"async", 1}, {"async", 4}} {
		t.Run(tt.strategy, func(t *testing.T) {
			s := newShop(t, tt.strategy, 2)
			sale := s.sale(tt.strategy, 30, 40, 160)
			sale.Shards, sale.QuantityMax, sale.LimitPerBuyer = tt.shards, 3, 3
			row, err := sale.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			checkExact(t, row)
			if row.Units != 30 || row.MaxBuyerUnits > 3 || row.MaxBuyerUnits < 2 || row.Orders >= row.Units || row.LimitPerBuyer != 3 || row.Lifecycle != nil {
				t.Errorf("row %+v; want 30 units sold in fewer orders, at most 3 per buyer", row)
			}
		})
	}
}
