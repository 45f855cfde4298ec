package async_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
)

// TestRewoundRedisIsNoticedAndRepaired puts a voucher's keys back to what
// they were 20 persisted orders earlier, as a failover to a replica that
// lagged does (TestDurabilityMemoryFailover in cmd/flashsale causes the
// real failover). Concurrent sales before it are no rewind; the next
// order after it is: the service records "at least 20" for reconcile,
// records the 20 buyers MySQL holds again with a unit each, so the stock
// is exact and none of them can buy twice.
func TestRewoundRedisIsNoticedAndRepaired(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(100)
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	sell := func(from, to int64) {
		var wg sync.WaitGroup
		for u := from; u <= to; u++ {
			wg.Go(func() {
				if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u}); err != nil {
					t.Errorf("PlaceOrder(%d): %v", u, err)
				}
			})
		}
		wg.Wait()
	}
	sell(1, 10)
	e.WaitDrained(v.ID, 10)
	vk := e.Keys.Voucher(v.ID)
	keys := []string{vk.Meta, vk.Buyers, vk.Orders}
	old := make(map[string]string, len(keys))
	for _, k := range keys {
		dump, err := e.Client.Do(ctx, e.Client.B().Dump().Key(k).Build()).ToString()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		old[k] = dump
	}
	sell(11, 30)
	e.WaitDrained(v.ID, 30)
	stop()
	if _, losses := e.losses(); len(losses) != 0 {
		t.Fatalf("concurrent sales reported as losses: %+v", losses)
	}

	for k, dump := range old { // the replica that lagged is promoted
		e.Do(e.Client.B().Restore().Key(k).Ttl(0).SerializedValue(dump).Replace().Build())
	}
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 31}); err != nil {
		t.Fatal(err)
	}
	var rewinds []async.EpochLoss
	e.WaitFor("the rewind in the epochs stream and MySQL's buyers recorded", 10*time.Second, func() (bool, error) {
		_, rewinds = e.losses()
		stock, _, buyers := e.Snapshot(v.ID)
		return len(rewinds) > 0 && buyers == 31 && stock == 69, nil
	})
	if len(rewinds) != 1 || rewinds[0].Kind != async.LossRewound || rewinds[0].AtLeast != 20 {
		t.Errorf("rewinds recorded: %+v; want one, at least 20", rewinds)
	}
	_, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 15})
	if asynctest.Code(err) != flashsale.EDuplicateOrder {
		t.Errorf("a buyer whose persisted order Redis had lost buys again: %v; want %s", err, flashsale.EDuplicateOrder)
	}
}

// losses returns Redis's epoch and the losses recorded in the epochs
// stream.
func (e *env) losses() (string, []async.EpochLoss) {
	e.T.Helper()
	cur, losses, err := async.ReadEpochs(context.Background(), e.Client, e.Prefix)
	if err != nil {
		e.T.Fatal(err)
	}
	return cur, losses
}
