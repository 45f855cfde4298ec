package lab_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// TestDrainAcceptsMoreOrdersThanRedisExpects: when MySQL holds more orders
// than Redis's buyers account for, the drain is over (the audit reports
// the excess); it does not wait out its timeout.
func TestDrainAcceptsMoreOrdersThanRedisExpects(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rc, prefix := testenv.Redis(t)
	ids := idgen.NewSlots(rc, "id", idgen.WithPrefix(prefix+"idgen:"))
	defer ids.Close()
	svc, err := async.NewService(rc, db, async.Config{Prefix: prefix, OrderIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	v := &flashsale.Voucher{Title: "drain", Stock: 10, BeginTime: now.Add(-time.Hour), EndTime: now.Add(time.Hour)}
	if err := svc.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	// Two buyers in Redis; no consumer runs, so MySQL gets their orders by
	// hand, and one more nobody accepted.
	for u := int64(1); u <= 3; u++ {
		o := &flashsale.Order{VoucherID: v.ID, UserID: u, Status: flashsale.StatusCreated}
		if u <= 2 {
			accepted, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
			if err != nil {
				t.Fatal(err)
			}
			o.ID = accepted.ID
		} else if o.ID, err = ids.NextID(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.InsertOrder(ctx, o, 1); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	if err := lab.NewAuditor(db, rc, prefix).Drain(ctx, v.ID, 3*time.Second); err != nil || time.Since(start) > time.Second {
		t.Fatalf("Drain = %v after %s; want nil at once", err, time.Since(start))
	}
}
