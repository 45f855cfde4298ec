package store

import (
	"context"
	"testing"

	"github.com/flashsale/flashsale"
)

// TestIdempotencyKeysByteForByte persists two orders of one buyer whose
// keys differ only in case: both are stored, as the gate accepted both
// (issue 33: the column's case-blind collation made the second a
// duplicate, skipped by INSERT IGNORE and retried without end).
func TestIdempotencyKeysByteForByte(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		v := newVoucher(1, 10)
		v.LimitPerBuyer = 3
		if err := db.CreateVoucher(context.Background(), v); err != nil {
			t.Fatal(err)
		}
		orders := []flashsale.Order{
			{ID: 1001, VoucherID: 1, UserID: 7, IdempotencyKey: "abc"},
			{ID: 1002, VoucherID: 1, UserID: 7, IdempotencyKey: "ABC"},
		}
		wantResult(t, persist(t, db, orders[:1]), flashsale.OutcomeInserted)
		wantResult(t, persist(t, db, orders[1:]), flashsale.OutcomeInserted)
		wantOrders(t, db, 1, 1001, 1002)
		for _, o := range orders {
			got, err := db.FindOrder(t.Context(), o.ID)
			if err != nil || got.IdempotencyKey != o.IdempotencyKey {
				t.Fatalf("FindOrder(%d) = %+v, %v; want key %q", o.ID, got, err, o.IdempotencyKey)
			}
		}
	})
}
