package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale"
)

// wantRemaining fails the test unless the voucher has n remaining.
func wantRemaining(t testing.TB, db *DB, id int64, n int) {
	t.Helper()
	got, err := db.Remaining(context.Background(), id)
	if err != nil || got != n {
		t.Fatalf("Remaining(%d) = %d, %v; want %d", id, got, err, n)
	}
}

func TestRemaining(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		wantRemaining(t, db, 1, 10)
		_, err := db.Remaining(t.Context(), 2)
		wantCode(t, err, flashsale.ENotFound)
	})
}

func TestSetRemaining(t *testing.T) {
	tests := []struct {
		name      string
		id        int64
		n         int
		code      string
		remaining int
	}{
		{"lower", 1, 4, "", 4},
		{"zero", 1, 0, "", 0},
		{"same value", 1, 10, "", 10},
		{"negative", 1, -1, flashsale.EInvalid, 10},
		{"above stock", 1, 11, flashsale.EInvalid, 10},
		{"missing voucher", 2, 5, flashsale.ENotFound, 10},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := db.SetRemaining(t.Context(), 1, 10); err != nil {
					t.Fatal(err)
				}
				wantCode(t, db.SetRemaining(t.Context(), tt.id, tt.n), tt.code)
				wantRemaining(t, db, 1, tt.remaining)
			})
		}
	})
}

func TestCompareAndSetRemaining(t *testing.T) {
	tests := []struct {
		name      string
		id        int64
		old, new  int
		ok        bool
		code      string
		remaining int
	}{
		{"matches", 1, 10, 9, true, "", 9},
		{"same value", 1, 10, 10, true, "", 10},
		{"stale read", 1, 11, 9, false, "", 10},
		{"missing voucher", 2, 10, 9, false, "", 10},
		{"negative", 1, 10, -1, false, flashsale.EInvalid, 10},
		{"above stock", 1, 10, 11, false, flashsale.EInvalid, 10},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := db.SetRemaining(t.Context(), 1, 10); err != nil {
					t.Fatal(err)
				}
				ok, err := db.CompareAndSetRemaining(t.Context(), tt.id, tt.old, tt.new)
				wantCode(t, err, tt.code)
				if ok != tt.ok {
					t.Errorf("CompareAndSetRemaining = %v, want %v", ok, tt.ok)
				}
				wantRemaining(t, db, 1, tt.remaining)
			})
		}
	})
}

func TestDecrementRemaining(t *testing.T) {
	tests := []struct {
		name      string
		id        int64
		n         int
		ok        bool
		code      string
		remaining int
	}{
		{"one", 1, 1, true, "", 9},
		{"several", 1, 3, true, "", 7},
		{"all", 1, 10, true, "", 0},
		{"more than left", 1, 11, false, "", 10},
		{"missing voucher", 2, 1, false, "", 10},
		{"zero", 1, 0, false, flashsale.EInvalid, 10},
		{"negative", 1, -1, false, flashsale.EInvalid, 10},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := db.SetRemaining(t.Context(), 1, 10); err != nil {
					t.Fatal(err)
				}
				ok, err := db.DecrementRemaining(t.Context(), tt.id, tt.n)
				wantCode(t, err, tt.code)
				if ok != tt.ok {
					t.Errorf("DecrementRemaining = %v, want %v", ok, tt.ok)
				}
				wantRemaining(t, db, 1, tt.remaining)
			})
		}
	})
}

// TestCheckConstraints writes past the store's methods: the table itself
// must refuse a negative remaining stock or one above the stock.
func TestCheckConstraints(t *testing.T) {
	tests := []struct {
		name, update string
	}{
		{"negative", "UPDATE vouchers SET remaining = -1 WHERE id = 1"},
		{"decrement below zero", "UPDATE vouchers SET remaining = remaining - 11 WHERE id = 1"},
		{"above stock", "UPDATE vouchers SET remaining = stock + 1 WHERE id = 1"},
		{"stock below remaining", "UPDATE vouchers SET stock = 9 WHERE id = 1"},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := db.writer.ExecContext(t.Context(), tt.update)
				if !isCheckViolation(err) {
					t.Fatalf("%s: err = %v, want a CHECK violation", tt.update, err)
				}
				wantRemaining(t, db, 1, 10)
			})
		}
	})
}

// TestConcurrentDecrement has more buyers than stock decrement at once: the
// conditional update sells exactly the stock and never goes below zero.
func TestConcurrentDecrement(t *testing.T) {
	const stock, buyers = 30, 50
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, stock)
		var sold, failed atomic.Int64
		var wg sync.WaitGroup
		for range buyers {
			wg.Go(func() {
				ok, err := db.DecrementRemaining(context.Background(), 1, 1)
				switch {
				case err != nil:
					failed.Add(1)
					t.Errorf("DecrementRemaining: %v", err)
				case ok:
					sold.Add(1)
				}
			})
		}
		wg.Wait()
		if sold.Load() != stock || failed.Load() != 0 {
			t.Errorf("sold %d (errors %d), want exactly %d", sold.Load(), failed.Load(), stock)
		}
		wantRemaining(t, db, 1, 0)
	})
}

func TestStockFenceRefusesAStaleHolder(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		claim := func(fence int64, want bool) {
			t.Helper()
			if ok, err := db.ClaimStockFence(t.Context(), 1, fence); err != nil || ok != want {
				t.Fatalf("ClaimStockFence(%d) = %v, %v; want %v", fence, ok, err, want)
			}
		}
		set := func(old, n int, fence int64, want bool) {
			t.Helper()
			if ok, err := db.SetRemainingFenced(t.Context(), 1, old, n, fence); err != nil || ok != want {
				t.Fatalf("SetRemainingFenced(%d → %d, fence %d) = %v, %v; want %v", old, n, fence, ok, err, want)
			}
		}
		claim(5, true)
		set(10, 9, 5, true) // the claimer writes
		claim(7, true)      // the next holder claims before the stale one (5) writes
		set(9, 8, 5, false)
		claim(6, false) // a stale holder claiming late is refused too
		set(9, 8, 7, true)
		set(8, 7, 9, true) // a higher fence writes without a claim
		set(7, 6, 8, false)
		wantRemaining(t, db, 1, 7)
		// The stock moved since the holder read it (a return): ErrStockMoved.
		if ok, err := db.SetRemainingFenced(t.Context(), 1, 6, 5, 9); !errors.Is(err, ErrStockMoved) || ok {
			t.Fatalf("SetRemainingFenced from a stale read = %v, %v; want ErrStockMoved", ok, err)
		}
		if ok, err := db.SetRemainingFenced(t.Context(), 2, 1, 0, 99); err != nil || ok {
			t.Fatalf("SetRemainingFenced on a missing voucher = %v, %v", ok, err)
		}
	})
}
