package async_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
)

// TestRedisRestartedEmptyReloadsWithoutOversell restarts a private Redis
// without persistence mid-sale, with 16 buyers at once and the consumer
// running. The service notices the new epoch, reports a bound on the
// orders that may be lost (which holds), reloads the voucher from MySQL,
// and the sale goes on to sell exactly the stock in MySQL: no unit sold
// twice, no buyer with two orders.
func TestRedisRestartedEmptyReloadsWithoutOversell(t *testing.T) {
	e, srv := privateEnv(t)
	ctx := context.Background()
	const stock, buyers = 300, 900
	v := e.Voucher(stock)
	if _, err := e.Svc.CheckEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Go(func() { e.Svc.WatchEpoch(wctx, 20*time.Millisecond) })
	t.Cleanup(func() { stopWatch(); watch.Wait() })
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))

	var (
		mu       sync.Mutex
		accepted = map[int64]int64{} // order → user
		restart  sync.Once
		codes    sync.Map
	)
	sell := func(from, to int64) {
		var next atomic.Int64
		next.Store(from - 1)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for u := next.Add(1); u <= to; u = next.Add(1) {
					o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
					if err != nil {
						n, _ := codes.LoadOrStore(asynctest.Code(err), new(atomic.Int64))
						n.(*atomic.Int64).Add(1)
						continue
					}
					mu.Lock()
					accepted[o.ID] = u
					n := len(accepted)
					mu.Unlock()
					if n == 100 {
						restart.Do(srv.Restart)
					}
				}
			})
		}
		wg.Wait()
	}
	sell(1, buyers)
	e.WaitFor("the loss to be noticed", 30*time.Second, func() (bool, error) {
		_, losses, err := async.ReadEpochs(ctx, e.Client, e.Prefix)
		return len(losses) > 0, err
	})
	sell(1, buyers) // those refused while Redis was down try again
	e.WaitFor("the sale to drain and sell out in MySQL", 60*time.Second, func() (bool, error) {
		b, err := e.Svc.Backlog(ctx)
		if err != nil || b > 0 {
			return false, err
		}
		a, err := e.DB.AuditVoucher(ctx, v.ID)
		return a.Remaining == 0, err
	})

	a, err := e.DB.AuditVoucher(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Orders != stock || a.Remaining != 0 || a.DistinctBuyers != stock || a.DuplicateBuyers != 0 {
		t.Errorf("MySQL audit %+v: want %d orders by %d buyers, none left", a, stock, stock)
	}
	var lost int64
	for id, u := range accepted {
		o, err := e.DB.FindOrder(ctx, id)
		switch {
		case asynctest.Code(err) == flashsale.ENotFound:
			lost++
		case err != nil:
			t.Fatal(err)
		case o.UserID != u:
			t.Errorf("order %d: user %d in MySQL, accepted for %d", id, o.UserID, u)
		}
	}
	_, losses, err := async.ReadEpochs(ctx, e.Client, e.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	var bound int64
	for _, l := range losses {
		bound += l.MayBeLost
		t.Logf("loss noticed: %+v", l)
	}
	codes.Range(func(k, n any) bool { t.Logf("refused %s: %d", k, n.(*atomic.Int64).Load()); return true })
	dead := int64(len(e.DeadLetters(v.ID)))
	t.Logf("accepted %d, not in MySQL %d (bound reported %d), dead letters %d", len(accepted), lost, bound, dead)
	if lost-dead > bound {
		t.Errorf("%d accepted orders lost, but the service reported at most %d", lost-dead, bound)
	}
}
