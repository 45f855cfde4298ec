package store

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/flashsale/flashsale"
)

// takeOrder is the one-order-per-user purchase the strategies build on: in
// one transaction, check the user has no order, take one unit of stock and
// insert the order.
func takeOrder(ctx context.Context, tx *Tx, o *flashsale.Order) error {
	units, _, err := tx.BuyerUnits(ctx, o.VoucherID, o.UserID)
	if err != nil {
		return err
	}
	if units > 0 {
		return flashsale.Errorf(flashsale.EDuplicateOrder, "already ordered")
	}
	ok, err := tx.DecrementRemaining(ctx, o.VoucherID, 1)
	if err != nil {
		return err
	}
	if !ok {
		return flashsale.Errorf(flashsale.ESoldOut, "sold out")
	}
	return tx.InsertOrder(ctx, o, 1)
}

func TestTxCommits(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		err := db.Tx(t.Context(), func(tx *Tx) error {
			return takeOrder(t.Context(), tx, &flashsale.Order{ID: 5, VoucherID: 1, UserID: 50})
		})
		if err != nil {
			t.Fatal(err)
		}
		wantRemaining(t, db, 1, 9)
		if _, err := db.FindOrder(t.Context(), 5); err != nil {
			t.Errorf("FindOrder after commit: %v", err)
		}
	})
}

func TestTxRollsBackOnError(t *testing.T) {
	errStop := errors.New("stop")
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		err := db.Tx(t.Context(), func(tx *Tx) error {
			if err := takeOrder(t.Context(), tx, &flashsale.Order{ID: 5, VoucherID: 1, UserID: 50}); err != nil {
				return err
			}
			if n, err := tx.Remaining(t.Context(), 1); err != nil || n != 9 {
				t.Errorf("Remaining inside the transaction = %d, %v; want 9", n, err)
			}
			return errStop
		})
		if err != errStop {
			t.Fatalf("Tx = %v, want fn's error unchanged", err)
		}
		wantNothingTaken(t, db)
	})
}

func TestTxRollsBackOnPanic(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		recovered := func() (p any) {
			defer func() { p = recover() }()
			_ = db.Tx(t.Context(), func(tx *Tx) error {
				if err := takeOrder(t.Context(), tx, &flashsale.Order{ID: 5, VoucherID: 1, UserID: 50}); err != nil {
					return err
				}
				panic("boom")
			})
			return nil
		}()
		if recovered != "boom" {
			t.Fatalf("recovered %v, want the panic to reach the caller", recovered)
		}
		wantNothingTaken(t, db)
		// The connection went back to the pool usable.
		if err := db.SetRemaining(t.Context(), 1, 8); err != nil {
			t.Fatal(err)
		}
	})
}

// wantNothingTaken fails the test unless voucher 1 has all 10 units and no
// orders.
func wantNothingTaken(t *testing.T, db *DB) {
	t.Helper()
	wantRemaining(t, db, 1, 10)
	_, err := db.FindOrder(t.Context(), 5)
	wantCode(t, err, flashsale.ENotFound)
}

// TestTxOneOrderPerUser has one user buy many times at once. The check in
// the transaction is a plain read, so several may pass it; buyer_units'
// CHECK refuses all but one and their stock goes back with the rollback.
func TestTxOneOrderPerUser(t *testing.T) {
	const attempts = 20
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		errs := make([]error, attempts)
		var wg sync.WaitGroup
		for i := range attempts {
			wg.Go(func() {
				errs[i] = db.Tx(context.Background(), func(tx *Tx) error {
					return takeOrder(context.Background(), tx, &flashsale.Order{ID: int64(i + 1), VoucherID: 1, UserID: 77})
				})
			})
		}
		wg.Wait()
		codes := map[string]int{}
		for _, err := range errs {
			codes[flashsale.ErrorCode(err)]++
		}
		if codes[""] != 1 || codes[flashsale.EDuplicateOrder] != attempts-1 {
			t.Errorf("outcomes by error code = %v; want 1 success and %d duplicates", codes, attempts-1)
		}
		wantRemaining(t, db, 1, 9)
	})
}
