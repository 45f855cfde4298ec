package store

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

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

// TestPaymentAmountCheckedMultiply pays an order of 4 units of a voucher
// whose pay_value is 2^62 (stored before prices were capped): 2^62 × 4
// wraps to 0 in 64 bits, and an amount of 0 was accepted (issue 33).
func TestPaymentAmountCheckedMultiply(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		now := time.Now().UTC()
		v := newVoucher(1, 10)
		v.LimitPerBuyer = 4
		if err := db.CreateVoucher(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		if _, err := db.w.ExecContext(t.Context(), "UPDATE vouchers SET pay_value = ? WHERE id = 1", int64(1)<<62); err != nil {
			t.Fatal(err)
		}
		o := awaiting(t, db, 1, 4, now.Add(time.Minute), 7)
		for _, amount := range []int64{0, math.MaxInt64} {
			_, _, err := db.PayOrder(t.Context(), flashsale.Payment{ID: fmt.Sprint("p", amount), OrderID: o[0].ID, Amount: amount}, now)
			wantCode(t, err, flashsale.EInvalid)
		}
		wantStatus(t, db, o[0].ID, flashsale.StatusAwaitingPayment)
	})
}

// TestPriceCapped: a voucher's prices are at most flashsale.MaxPrice.
func TestPriceCapped(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		v := newVoucher(1, 10)
		v.PayValue = flashsale.MaxPrice + 1
		wantCode(t, db.CreateVoucher(t.Context(), v), flashsale.EInvalid)
		v.PayValue = flashsale.MaxPrice
		if err := db.CreateVoucher(t.Context(), v); err != nil {
			t.Fatal(err)
		}
	})
}
