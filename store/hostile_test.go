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
		// Limit 1 with a window: abc, cancelled, then ABC.
		w := newVoucher(2, 10)
		w.PaymentWindowSeconds = 60
		if err := db.CreateVoucher(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		payBy := time.Now().Add(time.Minute)
		wantResult(t, persist(t, db, []flashsale.Order{{ID: 2001, VoucherID: 2, UserID: 7, IdempotencyKey: "abc", PayBy: payBy}}), flashsale.OutcomeInserted)
		if _, _, err := db.CancelOrder(t.Context(), 2001, 7, time.Now()); err != nil {
			t.Fatal(err)
		}
		wantResult(t, persist(t, db, []flashsale.Order{{ID: 2002, VoucherID: 2, UserID: 7, IdempotencyKey: "ABC", PayBy: payBy}}), flashsale.OutcomeInserted)
		wantOrders(t, db, 2, 2002)
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

// wantLiveOrders fails the test unless FindVoucher's Orders and the
// orders table agree that the voucher has n live orders.
func wantLiveOrders(t testing.TB, db *DB, voucherID int64, n int) {
	t.Helper()
	v, err := db.FindVoucher(t.Context(), voucherID)
	var counted int
	if err == nil {
		err = db.r.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM orders WHERE voucher_id = ? AND "+liveOrders, voucherID).Scan(&counted)
	}
	if err != nil || v.Orders != n || counted != n {
		t.Fatalf("voucher %d: Orders %d, %d counted (%v); want %d", voucherID, v.Orders, counted, err, n)
	}
}

// TestVoucherOrdersKeptNotCounted: a voucher's live orders are kept in
// its row by every transaction that opens or closes an order, so
// FindVoucher and the lists read no order (issue 33: they counted every
// order of the voucher on each anonymous GET). On MySQL the orders table
// is locked by another session meanwhile: a read of it would wait.
func TestVoucherOrdersKeptNotCounted(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		now := time.Now().UTC()
		v := newVoucher(1, 2000)
		v.LimitPerBuyer = 2
		if err := db.CreateVoucher(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		users := make([]int64, 500)
		for i := range users {
			users[i] = int64(i + 1)
		}
		persist(t, db, batch(1, users...))                              // 500 created
		o := awaiting(t, db, 1, 1, now.Add(time.Minute), 601, 602, 603) // 3 awaiting payment
		insertOrders(t, db, 1, flashsale.StatusCreated, 701)
		insertOrders(t, db, 1, flashsale.StatusFailed, 702)
		wantLiveOrders(t, db, 1, 504)
		if _, _, err := db.CancelOrder(t.Context(), o[0].ID, 601, now); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExpireDue(t.Context(), now.Add(2*time.Minute), 10); err != nil {
			t.Fatal(err)
		}
		wantLiveOrders(t, db, 1, 501)
		if db.dialect != MySQL {
			return
		}
		conn, err := db.writer.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(t.Context(), "LOCK TABLES orders WRITE"); err != nil {
			t.Fatal(err)
		}
		defer conn.ExecContext(context.Background(), "UNLOCK TABLES") //nolint:errcheck
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		got, err := db.FindVoucher(ctx, 1)
		if err != nil || got.Orders != 501 {
			t.Fatalf("FindVoucher with orders locked: %+v, %v; want 501 orders, read from the voucher's row", got, err)
		}
		if page, err := db.FindVouchers(ctx, 0, 10); err != nil || len(page) != 1 || page[0].Orders != 501 {
			t.Fatalf("FindVouchers with orders locked: %v, %v", page, err)
		}
	})
}
