package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// TestFinishedSaleIsRetired ends two sales: the drained one's keys are
// deleted after the grace period and MySQL answers for it (the voucher's
// figures, its orders, "ended" for a late order, which loads nothing back);
// the one with a dead letter keeps its keys until its dead-letter stream
// is deleted, then is retired too.
func TestFinishedSaleIsRetired(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// Three seconds: each voucher's first order may wait up to one for
	// its slot's id range (a new idgen hash).
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(3*time.Second)
	v, kept := e.Voucher(20, begin, end), e.Voucher(20, begin, end)
	accepted := e.Buy(v.ID, asynctest.Users(1, 10)...)
	kk := e.Keys.Voucher(kept.ID)
	e.Do(e.Client.B().Xadd().Key(kk.Orders).Id("*").FieldValue().FieldValue(layout.FieldOrder, "x").FieldValue(layout.FieldUser, "1").Build())
	e.Buy(kept.ID, 2)
	cfg := e.ConsumerConfig()
	cfg.RetireAfter, cfg.Audit = 300*time.Millisecond, e.DB
	e.Run(consume.New(e.Client, e.DB, cfg))
	e.WaitDrained(v.ID, 10)

	e.WaitFor("the drained sale's keys to be deleted", 30*time.Second, func() (bool, error) {
		return e.keysLeft(v.ID) == 0, nil
	})
	if n := e.keysLeft(kept.ID); n == 0 {
		t.Fatal("the sale with a dead letter was retired")
	}
	rep, err := e.Reconciler().Check(ctx, v.ID)
	if err != nil || !rep.Retired || len(rep.Diffs) != 0 || rep.Orders != 10 {
		t.Fatalf("reconcile of the retired sale: %+v, %v; want retired, 10 orders, no differences", rep, err)
	}
	got, err := e.Svc.FindVoucher(ctx, v.ID)
	if err != nil || got.Remaining != 10 || got.Orders != 10 {
		t.Fatalf("FindVoucher of the retired sale: %+v, %v; want 10 remaining, 10 orders", got, err)
	}
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 11}); asynctest.Code(err) != flashsale.EEnded {
		t.Fatalf("an order for the retired sale: %v; want ended", err)
	}
	if n := e.keysLeft(v.ID); n != 0 {
		t.Fatalf("an order for the retired sale loaded %d keys back", n)
	}
	for _, o := range accepted {
		if got, err := e.Svc.FindOrder(ctx, o.ID); err != nil || got.Status != flashsale.StatusCreated {
			t.Fatalf("order %d of the retired sale: %+v, %v", o.ID, got, err)
		}
	}

	e.Do(e.Client.B().Del().Key(kk.Dead).Build()) // a person dealt with it
	// The sweep deletes a sale's keys, then takes it off the retiring set.
	e.WaitFor("the other sale's keys deleted and the retiring set empty", 30*time.Second, func() (bool, error) {
		if e.keysLeft(kept.ID) != 0 {
			return false, nil
		}
		n, err := e.Client.Do(ctx, e.Client.B().Zcard().Key(e.Keys.Retiring()).Build()).AsInt64()
		return n == 0, err
	})
}

// keysLeft counts the voucher's keys in Redis.
func (e *env) keysLeft(voucherID int64) int64 {
	e.T.Helper()
	vk := e.Keys.Voucher(voucherID)
	n, err := e.Do(e.Client.B().Exists().Key(vk.Meta, vk.Buyers, vk.Orders, vk.Dead, vk.Failed, vk.Tries).Build()).AsInt64()
	if err != nil {
		e.T.Fatal(err)
	}
	return n
}
