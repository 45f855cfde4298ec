package strategy_test

import (
	"testing"

	"github.com/flashsale/flashsale"
)

// TestSafeStrategiesWriteEvents: every safe strategy writes one
// order.placed per order it stored and one voucher.sold_out when the last
// unit goes, in the transactions that store them.
func TestSafeStrategiesWriteEvents(t *testing.T) {
	for _, name := range []string{"conditional", "lock", "stocklock", "batch"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			voucherID := f.voucher(t, 5)
			codes := sale(t, f.strategy(t, name, 0), voucherID, 8)
			if codes[""] != 5 {
				t.Fatalf("answers = %v, want 5 orders", codes)
			}
			for {
				n, err := f.db.SequenceEvents(t.Context(), 100)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
			events, err := f.db.EventsAfter(t.Context(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			held, err := f.db.HeldOrders(t.Context(), voucherID)
			if err != nil {
				t.Fatal(err)
			}
			placed := map[int64]int{}
			soldOut := 0
			for _, e := range events {
				switch e.Type {
				case flashsale.EventOrderPlaced:
					placed[e.OrderID]++
				case flashsale.EventVoucherSoldOut:
					soldOut++
				default:
					t.Errorf("unexpected event %s", e.Type)
				}
			}
			if len(placed) != len(held) || soldOut != 1 {
				t.Fatalf("events: %d orders placed, %d sold out; want %d orders, 1 sold out", len(placed), soldOut, len(held))
			}
			for _, o := range held {
				if placed[o.ID] != 1 {
					t.Errorf("order %d has %d placed events", o.ID, placed[o.ID])
				}
			}
		})
	}
}
