package async

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestFinishedSaleIsRetired ends two sales: the drained one's keys are
// deleted after the grace period and MySQL answers for it (the voucher's
// figures, its orders, "ended" for a late order, which loads nothing back);
// the one with a dead letter keeps its keys until its dead-letter stream
// is deleted, then is retired too.
func TestFinishedSaleIsRetired(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(2*time.Second)
	v, kept := e.voucher(20, begin, end), e.voucher(20, begin, end)
	accepted := e.buy(v.ID, users(1, 10)...)
	kk := e.svc.keys.voucher(kept.ID)
	e.do(e.client.B().Xadd().Key(kk.orders).Id("*").FieldValue().FieldValue(fieldOrder, "x").FieldValue(fieldUser, "1").Build())
	e.buy(kept.ID, 2)
	cfg := e.consumerConfig()
	cfg.RetireAfter, cfg.Audit = 300*time.Millisecond, e.db
	e.run(NewConsumer(e.client, e.db, cfg))
	e.waitDrained(v.ID, 10)

	e.waitFor("the drained sale's keys to be deleted", 30*time.Second, func() (bool, error) {
		return e.keysLeft(v.ID) == 0, nil
	})
	if n := e.keysLeft(kept.ID); n == 0 {
		t.Fatal("the sale with a dead letter was retired")
	}
	rep, err := e.reconciler().Check(ctx, v.ID)
	if err != nil || !rep.Retired || len(rep.Diffs) != 0 || rep.Orders != 10 {
		t.Fatalf("reconcile of the retired sale: %+v, %v; want retired, 10 orders, no differences", rep, err)
	}
	got, err := e.svc.FindVoucher(ctx, v.ID)
	if err != nil || got.Remaining != 10 || got.Orders != 10 {
		t.Fatalf("FindVoucher of the retired sale: %+v, %v; want 10 remaining, 10 orders", got, err)
	}
	if _, err := e.svc.PlaceOrder(ctx, v.ID, 11); code(err) != flashsale.EEnded {
		t.Fatalf("an order for the retired sale: %v; want ended", err)
	}
	if n := e.keysLeft(v.ID); n != 0 {
		t.Fatalf("an order for the retired sale loaded %d keys back", n)
	}
	for _, o := range accepted {
		if got, err := e.svc.FindOrder(ctx, o.ID); err != nil || got.Status != flashsale.StatusCreated {
			t.Fatalf("order %d of the retired sale: %+v, %v", o.ID, got, err)
		}
	}

	e.do(e.client.B().Del().Key(kk.dead).Build()) // a person dealt with it
	e.waitFor("the other sale's keys to be deleted", 30*time.Second, func() (bool, error) {
		return e.keysLeft(kept.ID) == 0, nil
	})
	n, err := e.client.Do(ctx, e.client.B().Zcard().Key(e.svc.keys.retiring()).Build()).AsInt64()
	if err != nil || n != 0 {
		t.Fatalf("retiring set holds %d, %v; want it empty", n, err)
	}
}

// keysLeft counts the voucher's keys in Redis.
func (e *env) keysLeft(voucherID int64) int64 {
	e.t.Helper()
	vk := e.svc.keys.voucher(voucherID)
	n, err := e.do(e.client.B().Exists().Key(vk.meta, vk.buyers, vk.orders, vk.dead, vk.failed, vk.tries).Build()).AsInt64()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}
