package store

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// insertOrders inserts one order per user for the voucher, with the status,
// and order id voucherID*1000+user.
func insertOrders(t testing.TB, db *DB, voucherID int64, status flashsale.OrderStatus, users ...int64) {
	t.Helper()
	for _, u := range users {
		o := &flashsale.Order{ID: voucherID*1000 + u, VoucherID: voucherID, UserID: u, Status: status}
		if err := db.InsertOrder(t.Context(), o, 1); err != nil {
			t.Fatalf("InsertOrder(%+v): %v", o, err)
		}
	}
}

func TestInsertAndFindOrder(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		before := time.Now().UTC().Add(-time.Second)
		o := &flashsale.Order{ID: 7, VoucherID: 1, UserID: 99}
		if err := db.InsertOrder(t.Context(), o, 1); err != nil {
			t.Fatal(err)
		}
		if o.Status != flashsale.StatusCreated || o.CreatedAt.Before(before) || o.UpdatedAt != o.CreatedAt {
			t.Errorf("InsertOrder left %+v; want status created and both times set to now", o)
		}
		got, err := db.FindOrder(t.Context(), 7)
		if err != nil || *got != *o {
			t.Errorf("FindOrder = %+v, %v; want %+v", got, err, o)
		}
		got, err = db.FindOrderByUser(t.Context(), 1, 99)
		if err != nil || *got != *o {
			t.Errorf("FindOrderByUser = %+v, %v; want %+v", got, err, o)
		}
	})
}

func TestFindOrderNotFound(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		insertOrders(t, db, 1, flashsale.StatusCreated, 5)
		_, err := db.FindOrder(t.Context(), 2)
		wantCode(t, err, flashsale.ENotFound)
		_, err = db.FindOrderByUser(t.Context(), 1, 6)
		wantCode(t, err, flashsale.ENotFound)
		_, err = db.FindOrderByUser(t.Context(), 2, 5)
		wantCode(t, err, flashsale.ENotFound)
	})
}

func TestInsertOrderRefused(t *testing.T) {
	tests := []struct {
		name  string
		order flashsale.Order
		code  string
	}{
		{"same voucher and user: past the limit of 1", flashsale.Order{ID: 2, VoucherID: 1, UserID: 10}, flashsale.EDuplicateOrder},
		{"same id", flashsale.Order{ID: 1, VoucherID: 1, UserID: 11}, flashsale.EDuplicateOrder},
		{"same id other voucher", flashsale.Order{ID: 1, VoucherID: 2, UserID: 10}, flashsale.EDuplicateOrder},
		{"unknown status", flashsale.Order{ID: 3, VoucherID: 1, UserID: 12, Status: "shipped"}, flashsale.EInvalid},
		{"closed status", flashsale.Order{ID: 3, VoucherID: 1, UserID: 12, Status: flashsale.StatusExpired}, flashsale.EInvalid},
		{"awaiting payment without pay_by", flashsale.Order{ID: 3, VoucherID: 1, UserID: 12, Status: flashsale.StatusAwaitingPayment}, flashsale.EInvalid},
		{"quantity past the limit", flashsale.Order{ID: 3, VoucherID: 1, UserID: 12, Quantity: 2}, flashsale.EDuplicateOrder},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		if err := db.InsertOrder(t.Context(), &flashsale.Order{ID: 1, VoucherID: 1, UserID: 10}, 1); err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				wantCode(t, db.InsertOrder(t.Context(), &tt.order, 1), tt.code)
			})
		}
		ids, err := db.OrderIDs(t.Context(), 1)
		if err != nil || !slices.Equal(ids, []int64{1}) {
			t.Errorf("OrderIDs = %v, %v; want only the first order", ids, err)
		}
	})
}

func TestBuyerUnits(t *testing.T) {
	tests := []struct {
		name          string
		voucher, user int64
		units         int
		latest        int64
	}{
		{"ordered", 1, 10, 1, 1010},
		{"pending counts", 1, 11, 1, 1011},
		{"other user", 1, 12, 0, 0},
		{"other voucher", 2, 10, 0, 0},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		insertOrders(t, db, 1, flashsale.StatusCreated, 10)
		insertOrders(t, db, 1, flashsale.StatusPending, 11)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				units, latest, err := db.BuyerUnits(t.Context(), tt.voucher, tt.user)
				if err != nil || units != tt.units || latest != tt.latest {
					t.Errorf("BuyerUnits(%d, %d) = %d, %d, %v; want %d, %d", tt.voucher, tt.user, units, latest, err, tt.units, tt.latest)
				}
			})
		}
	})
}

func TestMaxOrderID(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		if id, err := db.MaxOrderID(t.Context()); err != nil || id != 0 {
			t.Fatalf("MaxOrderID on an empty store = %d, %v; want 0", id, err)
		}
		insertOrders(t, db, 1, flashsale.StatusCreated, 3, 9, 5)
		insertOrders(t, db, 1<<40, flashsale.StatusCreated, 1) // ids beyond 32 bits
		if id, err := db.MaxOrderID(t.Context()); err != nil || id != (1<<40)*1000+1 {
			t.Fatalf("MaxOrderID = %d, %v; want %d", id, err, (1<<40)*1000+1)
		}
	})
}

func TestAuditVoucher(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		createVoucher(t, db, 2, 10)
		insertOrders(t, db, 1, flashsale.StatusCreated, 30, 10, 20)
		insertOrders(t, db, 1, flashsale.StatusPending, 40)
		insertOrders(t, db, 1, flashsale.StatusFailed, 50)
		insertOrders(t, db, 2, flashsale.StatusCreated, 10)
		if err := db.SetRemaining(t.Context(), 1, 6); err != nil {
			t.Fatal(err)
		}
		a, err := db.AuditVoucher(t.Context(), 1)
		want := flashsale.Audit{Stock: 10, Remaining: 6, Orders: 4, Units: 4, DistinctBuyers: 4, DuplicateBuyers: 0}
		if err != nil || a != want {
			t.Errorf("AuditVoucher = %+v, %v; want %+v", a, err, want)
		}
		ids, err := db.OrderIDs(t.Context(), 1)
		if err != nil || !slices.Equal(ids, []int64{1010, 1020, 1030, 1040}) {
			t.Errorf("OrderIDs = %v, %v", ids, err)
		}
		users, err := db.OrderUsers(t.Context(), 1)
		if err != nil || !slices.Equal(users, []int64{10, 20, 30, 40}) {
			t.Errorf("OrderUsers = %v, %v", users, err)
		}
		_, err = db.AuditVoucher(t.Context(), 3)
		wantCode(t, err, flashsale.ENotFound)
	})
}

// TestAuditCountsDuplicateBuyers drops the limit's CHECK, as a broken
// schema would, to check the audit sees what the key normally prevents.
func TestAuditCountsDuplicateBuyers(t *testing.T) {
	// Both dialects: buyer_units again, without its CHECK.
	unconstrain := []string{
		"DROP TABLE buyer_units",
		"CREATE TABLE buyer_units (voucher_id BIGINT NOT NULL, user_id BIGINT NOT NULL, units INT NOT NULL, max_units INT NOT NULL, PRIMARY KEY (voucher_id, user_id))",
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		for _, stmt := range unconstrain {
			if _, err := db.writer.ExecContext(t.Context(), stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		createVoucher(t, db, 1, 10)
		for i, u := range []int64{1, 1, 1, 2, 2, 3} {
			o := &flashsale.Order{ID: int64(i + 1), VoucherID: 1, UserID: u}
			if err := db.InsertOrder(t.Context(), o, 1); err != nil {
				t.Fatal(err)
			}
		}
		a, err := db.AuditVoucher(t.Context(), 1)
		want := flashsale.Audit{Stock: 10, Remaining: 10, Orders: 6, Units: 6, DistinctBuyers: 3, DuplicateBuyers: 2}
		if err != nil || a != want {
			t.Errorf("AuditVoucher = %+v, %v; want %+v", a, err, want)
		}
	})
}

// TestInsertOrderTellsATakenKeyFromATakenID: an insert refused by the
// idempotency key's unique index is ErrKeyTaken, not "order exists
// already" (issue 32); one refused by its id is not ErrKeyTaken.
func TestInsertOrderTellsATakenKeyFromATakenID(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		if err := db.InsertOrder(t.Context(), &flashsale.Order{ID: 1, VoucherID: 1, UserID: 10, IdempotencyKey: "k"}, 3); err != nil {
			t.Fatal(err)
		}
		err := db.InsertOrder(t.Context(), &flashsale.Order{ID: 2, VoucherID: 1, UserID: 10, IdempotencyKey: "k"}, 3)
		if !errors.Is(err, ErrKeyTaken) || strings.Contains(err.Error(), "exists already") {
			t.Errorf("insert with a taken key: %v; want ErrKeyTaken", err)
		}
		err = db.InsertOrder(t.Context(), &flashsale.Order{ID: 1, VoucherID: 1, UserID: 10, IdempotencyKey: "other"}, 3)
		if errors.Is(err, ErrKeyTaken) || flashsale.ErrorCode(err) != flashsale.EDuplicateOrder {
			t.Errorf("insert with a taken id: %v; want duplicate_order, not ErrKeyTaken", err)
		}
	})
}
