package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lifecycle"
)

// TestAnExpiryByASynchronousInstancePutsAnAsyncUnitBackOnSale: serve runs
// an expirer on every instance, and one of a synchronous strategy expires
// the due orders of every voucher in the database, an async voucher's
// too (the load lab found a unit stranded so: the instance gave it back to
// MySQL only and marked the return done). So serve gives every instance's
// lifecycle the gate's Restocker, whatever its strategy: a return of a
// voucher the gate does not hold changes nothing in Redis, and one of an
// async voucher puts the unit back on sale there.
func TestAnExpiryByASynchronousInstancePutsAnAsyncUnitBackOnSale(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, testenv.MySQLURL(t))
	rc, prefix := testenv.Redis(t)
	ids := idgen.NewSlots(rc, "id", idgen.WithPrefix(prefix+"idgen:"))
	t.Cleanup(ids.Close)
	svc, err := async.NewService(rc, db, async.Config{Prefix: prefix, OrderIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	v := &flashsale.Voucher{Title: "t", Stock: 1, BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour), PaymentWindowSeconds: 1}
	if err := svc.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	o, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1})
	if err != nil {
		t.Fatal(err)
	}
	// The consumer persists it, awaiting payment.
	cctx, stop := context.WithCancel(ctx)
	consumer := consume.New(rc, db, consume.Config{Prefix: prefix, Audit: db})
	go consumer.Run(cctx) //nolint:errcheck // stopped below
	for {
		if _, err := db.FindOrder(ctx, o.ID); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	// An instance of a synchronous strategy expires it, past its pay_by.
	sync := lifecycle.New(db, lifecycle.Config{Now: func() time.Time { return time.Now().Add(2 * time.Second) },
		Restocker: async.Returns(rc, async.Config{Prefix: prefix})}) // as serve wires every instance
	if err := sync.ExpireDue(ctx, lifecycle.ExpirerConfig{}); err != nil {
		t.Fatal(err)
	}
	if got, err := db.FindOrder(ctx, o.ID); err != nil || got.Status != flashsale.StatusExpired {
		t.Fatalf("order %+v, %v; want expired", got, err)
	}
	// This instance watches no return notices: it forgets the sell-out
	// after the default VerdictTTL, a second.
	time.Sleep(1200 * time.Millisecond)
	if _, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2}); err != nil {
		st, _ := async.ReadState(ctx, rc, prefix, v.ID)
		t.Fatalf("buying the expired unit: %v; the gate holds %+v", err, st)
	}
}
