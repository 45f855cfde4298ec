package store

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/flashsale/flashsale"
)

// sellBatch runs SellBatch on a fresh copy of orders, failing the test on
// error, and returns the sales and the orders as SellBatch left them.
func sellBatch(t testing.TB, db *DB, voucherID int64, orders []flashsale.Order) ([]flashsale.Outcome, []flashsale.Order) {
	t.Helper()
	orders = slices.Clone(orders)
	sales, err := db.SellBatch(context.Background(), voucherID, orders)
	if err != nil {
		t.Fatalf("SellBatch: %v", err)
	}
	return sales, orders
}

// TestSellBatchFirstComeAndConflicts: a batch that asks for more than is left
// serves its first new buyers and refuses the rest as short; a buyer with
// an order already, or earlier in the batch, is a repeat whatever the stock.
func TestSellBatchFirstComeAndConflicts(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 4)
		sales, _ := sellBatch(t, db, 1, batch(1, 7))
		if !slices.Equal(sales, []flashsale.Outcome{flashsale.OutcomeInserted}) {
			t.Fatalf("first batch: %v, want [inserted]", sales)
		}
		// Left: 3. User 7 bought before; user 2 comes twice.
		orders := batch(1, 1, 7, 2, 3, 2, 4, 5)
		orders[4].ID = 9002
		sales, stored := sellBatch(t, db, 1, orders)
		want := []flashsale.Outcome{flashsale.OutcomeInserted, flashsale.OutcomeConflict, flashsale.OutcomeInserted, flashsale.OutcomeInserted, flashsale.OutcomeConflict, flashsale.OutcomeShort, flashsale.OutcomeShort}
		if !slices.Equal(sales, want) {
			t.Fatalf("over-asking batch: %v, want %v", sales, want)
		}
		wantRemaining(t, db, 1, 0)
		wantOrders(t, db, 1, 1001, 1002, 1003, 1007)
		for i, s := range sales {
			if (s == flashsale.OutcomeInserted) != (stored[i].Status == flashsale.StatusCreated && !stored[i].CreatedAt.IsZero()) {
				t.Errorf("order %d (%v) left as %+v", stored[i].ID, s, stored[i])
			}
		}
		got, err := db.FindOrder(t.Context(), 1003)
		if err != nil || !got.CreatedAt.Equal(stored[3].CreatedAt) || !got.UpdatedAt.Equal(stored[3].UpdatedAt) {
			t.Errorf("FindOrder(1003) = %+v, %v; want the times SellBatch returned, %v", got, err, stored[3])
		}
		// Inserted out: only new buyers are short, repeats stay repeats.
		sales, _ = sellBatch(t, db, 1, []flashsale.Order{{ID: 5001, VoucherID: 1, UserID: 1}, {ID: 5002, VoucherID: 1, UserID: 9}})
		if !slices.Equal(sales, []flashsale.Outcome{flashsale.OutcomeConflict, flashsale.OutcomeShort}) {
			t.Fatalf("sold-out batch: %v, want [conflict short]", sales)
		}
		wantAudit(t, db, 1, 4, 0)
	})
}

// TestSellBatchRefusesBadInput: an order for another voucher, an order
// without an id and an unknown voucher are refused with nothing stored.
func TestSellBatchRefusesBadInput(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 4)
		ctx := t.Context()
		for _, orders := range [][]flashsale.Order{
			{{ID: 1001, VoucherID: 1, UserID: 1}, {ID: 2002, VoucherID: 2, UserID: 2}},
			{{ID: 0, VoucherID: 1, UserID: 1}},
		} {
			if _, err := db.SellBatch(ctx, 1, orders); flashsale.ErrorCode(err) != flashsale.EInvalid {
				t.Errorf("SellBatch(%v) = %v, want invalid", orders, err)
			}
		}
		if _, err := db.SellBatch(ctx, 3, batch(3, 1)); flashsale.ErrorCode(err) != flashsale.ENotFound {
			t.Errorf("SellBatch of an unknown voucher = %v, want not_found", err)
		}
		wantAudit(t, db, 1, 0, 4)
	})
}

// TestSellBatchConcurrentBatches: batches from many goroutines, with
// overlapping buyers, never oversell nor give a buyer two orders, and their
// sales add up to what is stored.
func TestSellBatchConcurrentBatches(t *testing.T) {
	const stock, writers, perBatch, batches = 50, 8, 10, 5
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, stock)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			sold = map[int64]int{} // user → orders sold to them
		)
		for w := range writers {
			wg.Go(func() {
				for b := range batches {
					orders := make([]flashsale.Order, perBatch)
					for i := range orders {
						// Users 1..40, each in the batches of several writers.
						user := int64((w*7+b*perBatch+i)%40 + 1)
						orders[i] = flashsale.Order{ID: int64(w*10000 + b*100 + i + 1), VoucherID: 1, UserID: user}
					}
					sales, err := db.SellBatch(context.Background(), 1, orders)
					if err != nil {
						t.Errorf("SellBatch: %v", err)
						return
					}
					mu.Lock()
					for i, s := range sales {
						if s == flashsale.OutcomeInserted {
							sold[orders[i].UserID]++
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for u, n := range sold {
			if n != 1 {
				t.Errorf("user %d sold %d orders", u, n)
			}
		}
		wantAudit(t, db, 1, len(sold), stock-len(sold))
	})
}

// wantAudit fails the test unless the voucher has the orders (from as many
// distinct buyers) and the remaining stock.
func wantAudit(t testing.TB, db *DB, voucherID int64, orders, remaining int) {
	t.Helper()
	a, err := db.AuditVoucher(context.Background(), voucherID)
	if err != nil || a.Orders != orders || a.DistinctBuyers != orders || a.Remaining != remaining {
		t.Fatalf("AuditVoucher(%d) = %+v, %v; want %d orders from distinct buyers, %d remaining", voucherID, a, err, orders, remaining)
	}
}
