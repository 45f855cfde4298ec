package vouchercache_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/internal/vouchercache"
	"github.com/flashsale/flashsale/store"
)

// newVoucher stores a voucher of id in db.
func newVoucher(t *testing.T, db *store.DB, id int64) *flashsale.Voucher {
	t.Helper()
	v := &flashsale.Voucher{ID: id, Title: "t", Stock: 5, BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := db.CreateVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCacheKeepsRowsWithinItsBound: a row read once is served from memory
// (its MySQL row deleted, it is still found), an id without a row is not
// kept, a row Put is a copy, and a cache past its bound reads again.
func TestCacheKeepsRowsWithinItsBound(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := vouchercache.New(db.Voucher, 2)

	v1 := newVoucher(t, db, 1)
	if got, err := c.Voucher(ctx, 1); err != nil || got.ID != 1 || got.Stock != 5 || !got.EndTime.Equal(v1.EndTime) {
		t.Fatalf("Voucher(1) = %+v, %v; want the row", got, err)
	}
	if err := db.DeleteVoucherWithoutOrders(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Voucher(ctx, 1); err != nil || got.ID != 1 {
		t.Fatalf("Voucher(1) once its row is deleted = %+v, %v; want the row kept", got, err)
	}

	if _, err := c.Voucher(ctx, 2); flashsale.ErrorCode(err) != flashsale.ENotFound {
		t.Fatalf("Voucher(2) before it exists = %v; want ENotFound", err)
	}
	newVoucher(t, db, 2)
	if got, err := c.Voucher(ctx, 2); err != nil || got.ID != 2 {
		t.Fatalf("Voucher(2) once created = %+v, %v; want the row: a miss is not kept", got, err)
	}

	// Put keeps a copy; a third row passes the bound of 2 and empties the
	// cache, so the deleted row 1 is read again: not found.
	v3 := &flashsale.Voucher{ID: 3, Title: "put", Stock: 7}
	c.Put(v3)
	v3.Title = "changed"
	if got, err := c.Voucher(ctx, 3); err != nil || got.Title != "put" {
		t.Fatalf("Voucher(3) after Put = %+v, %v; want the copy Put", got, err)
	}
	if _, err := c.Voucher(ctx, 1); flashsale.ErrorCode(err) != flashsale.ENotFound {
		t.Fatalf("Voucher(1) past the bound = %v; want ENotFound, read again", err)
	}
}
