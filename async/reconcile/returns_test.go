package reconcile_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
)

// TestReconcileFinishesAHalfDoneReturn: an order cancelled in MySQL whose
// units never went back into Redis (the instance died between the two
// halves) is reported, and the repair puts them back once.
func TestReconcileFinishesAHalfDoneReturn(t *testing.T) {
	e := asynctest.New(t)
	ctx := context.Background()
	v := &flashsale.Voucher{Title: "t", Stock: 3, PayValue: 100, PaymentWindowSeconds: 600,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := e.Svc.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	orders := e.Buy(v.ID, 1, 2)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 2)
	// The first half only, a minute ago: what a killed instance leaves.
	if _, _, err := e.DB.CancelOrder(ctx, orders[0].ID, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SQL.Exec("UPDATE orders SET updated_at = ? WHERE id = ?", time.Now().Add(-time.Minute).UTC().Format("2006-01-02 15:04:05.000000"), orders[0].ID); err != nil {
		t.Fatal(err)
	}
	r := e.Reconciler()
	rep, err := r.Check(ctx, v.ID)
	if got := asynctest.Kinds(rep.Diffs); err != nil || !slices.Contains(got, "return_pending 1") {
		t.Fatalf("Check = %v, %v; want return_pending of user 1", got, err)
	}
	for range 2 { // the second repair finds nothing to do
		if _, err := r.Repair(ctx, v.ID); err != nil {
			t.Fatal(err)
		}
	}
	if stock, _, held := e.Snapshot(v.ID); stock != 2 || held != 1 {
		t.Fatalf("Redis after the repair: stock %d, held %d; want 2 and 1 (the unit back once)", stock, held)
	}
	if rep, err := r.Check(ctx, v.ID); err != nil || len(rep.Diffs) != 0 {
		t.Fatalf("Check after the repair = %+v, %v; want no differences", rep, err)
	}
}

// TestReconcileFinishesAReturnRedisLost: a return done and marked done,
// then lost by Redis (durability memory, a failover to a replica that had
// not received it): the buyer still holds the closed order's unit. It is
// reported, and the repair puts it back once.
func TestReconcileFinishesAReturnRedisLost(t *testing.T) {
	e := asynctest.New(t)
	ctx := context.Background()
	v := &flashsale.Voucher{Title: "t", Stock: 3, PayValue: 100, PaymentWindowSeconds: 600,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := e.Svc.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	o := e.Buy(v.ID, 1)[0]
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 1)
	if _, err := e.Svc.CancelOrder(ctx, o.ID, 1); err != nil {
		t.Fatal(err)
	}
	// What Redis looked like before the return: the history a lagging
	// replica has.
	vk := e.Keys.Voucher(v.ID)
	e.Do(e.Client.B().Hset().Key(vk.Buyers).FieldValue().FieldValue("1", "1:"+itoa(o.ID)).Build())
	e.Do(e.Client.B().Hincrby().Key(vk.Meta).Field("stock").Increment(-1).Build())
	e.Do(e.Client.B().Hincrby().Key(vk.Meta).Field("returned").Increment(-1).Build())
	e.Do(e.Client.B().Hdel().Key(vk.Returned).Field(itoa(o.ID)).Build())
	r := e.Reconciler()
	rep, err := r.Repair(ctx, v.ID)
	if got := asynctest.Kinds(rep.Diffs); err != nil || !slices.Equal(got, []string{"return_pending 1 fixed"}) {
		t.Fatalf("Repair = %v, %v; want return_pending of user 1, fixed", got, err)
	}
	if stock, _, held := e.Snapshot(v.ID); stock != 3 || held != 0 {
		t.Fatalf("Redis after the repair: stock %d, held %d; want 3 and 0", stock, held)
	}
	if rep, err := r.Check(ctx, v.ID); err != nil || len(rep.Diffs) != 0 {
		t.Fatalf("Check after the repair = %+v, %v; want no differences", rep, err)
	}
}
