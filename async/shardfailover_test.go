package async_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
)

// failoverLag is how long the primary takes orders its paused replica
// never gets: below the Sentinels' down-after (2s), so the paused replica
// is never seen down and is promoted.
const failoverLag = 300 * time.Millisecond

// buyers places orders for fresh users (1, 2, …) from 32 goroutines until
// stopped, keeping the accepted ones; refusals and Redis errors (the
// failover) are answered by the next user.
type buyers struct {
	next     atomic.Int64
	mu       sync.Mutex
	accepted []*flashsale.Order
	stop     chan struct{}
	wg       sync.WaitGroup
}

// startBuyers starts buying the voucher through svc.
func startBuyers(svc *async.Service, voucherID int64) *buyers {
	b := &buyers{stop: make(chan struct{})}
	for range 32 {
		b.wg.Go(func() {
			for {
				select {
				case <-b.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				o, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: voucherID, UserID: b.next.Add(1)})
				cancel()
				if err == nil {
					b.mu.Lock()
					b.accepted = append(b.accepted, o)
					b.mu.Unlock()
				} else if asynctest.Code(err) == flashsale.EUnavailable {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	return b
}

// count returns how many orders were accepted so far.
func (b *buyers) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.accepted)
}

// halt stops the buyers and waits for them.
func (b *buyers) halt() {
	close(b.stop)
	b.wg.Wait()
}

// TestShardedRewindOnFailover sells a voucher of 3 shards on a primary,
// its replica and three Sentinels. Mid-sale the replica is made to lag
// (SIGSTOP, its link cut on the primary) while the primary takes orders
// for failoverLag, then the primary is SIGKILLed and the replica resumed
// and promoted: Redis goes back in time on every shard. The instance
// must notice it on each shard, log and record it per shard, and record
// again the buyers MySQL holds, so MySQL ends exact: nothing oversold,
// no buyer twice, and every order it holds has its buyer in Redis.
func TestShardedRewindOnFailover(t *testing.T) {
	const stock, k = 20000, 3
	set := testenv.StartSentinelSet(t)
	dsn, url := asynctest.MySQLDatabase(t)
	e := newEnvOn(t, set.Client(t), "test:"+testenv.Unique()+":", dsn, url)
	var logs testenv.Buffer
	e.Svc = e.loggedService(&logs)
	old, replica := set.Primary(), set.Replica()
	admin := old.Client(t)
	v := e.shardedVoucher(stock, k)
	shards := e.Keys.Shards(v.ID, k)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))

	b := startBuyers(e.Svc, v.ID)
	e.WaitFor("orders before the fault", 30*time.Second, func() (bool, error) { return b.count() >= 300, nil })
	replica.Pause()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if err := admin.Do(ctx, admin.B().Arbitrary("CLIENT", "KILL").Args("TYPE", "replica").Build()).Error(); err != nil {
		t.Logf("cutting the replica's link: %v", err) // it lags anyway while paused
	}
	cancel()
	before := b.count()
	time.Sleep(failoverLag)
	during := b.count() - before
	old.Kill()
	replica.Resume()
	set.WaitFailover(t, old.Addr(), 60*time.Second)
	t.Logf("%d orders accepted before the fault, %d while the replica lagged", before, during)

	rewound := map[string]async.EpochLoss{} // shard body → its rewind
	e.WaitFor("a rewind recorded on every shard", 60*time.Second, func() (bool, error) {
		_, losses := e.losses()
		for _, l := range losses {
			if l.Kind == async.LossRewound {
				rewound[l.Shard] = l
			}
		}
		return len(rewound) == k, nil
	})
	b.halt()
	if t.Failed() {
		return
	}
	for _, vk := range shards {
		l, ok := rewound[vk.Body]
		if !ok || l.AtLeast < 1 || l.AtLeast > int64(during+before) {
			t.Errorf("shard %s: rewind %+v; want one of at least 1", vk.Body, l)
		}
	}
	e.checkRepairedAfterRewind(v, shards, b.count())
	if n := strings.Count(logs.String(), rewindAlarm); n < k {
		t.Errorf("%d rewinds logged; want one per shard at least", n)
	}
}

// checkRepairedAfterRewind waits until the sale is drained, then checks
// MySQL is exact and every order it holds has its buyer recorded on its
// home shard.
func (e *env) checkRepairedAfterRewind(v *flashsale.Voucher, shards []layout.VoucherKeys, accepted int) {
	e.T.Helper()
	ctx := context.Background()
	e.WaitFor("the backlog drained", 60*time.Second, func() (bool, error) {
		n, err := e.Svc.Backlog(ctx)
		return n == 0, err
	})
	a, err := e.DB.AuditVoucher(ctx, v.ID)
	if err != nil {
		e.T.Fatal(err)
	}
	if a.Orders > v.Stock || a.Orders > accepted || a.Remaining+a.Orders != v.Stock || a.DistinctBuyers != a.Orders {
		e.T.Errorf("MySQL = %+v for a stock of %d, %d orders accepted; want exact", a, v.Stock, accepted)
	}
	_, orders, err := e.DB.VoucherSnapshot(ctx, v.ID)
	if err != nil {
		e.T.Fatal(err)
	}
	e.WaitFor("MySQL's buyers recorded in Redis", 30*time.Second, func() (bool, error) {
		for _, o := range orders {
			vk := shards[layout.HomeShard(o.UserID, len(shards))]
			got, err := e.Client.Do(ctx, e.Client.B().Hget().Key(vk.Buyers).Field(itoa(o.UserID)).Build()).ToString()
			if _, latest := layout.ParseBuyer(got); err != nil || latest != itoa(o.ID) {
				return false, nil
			}
		}
		return true, nil
	})
	e.T.Logf("MySQL: %d orders, %d left, of %d accepted", a.Orders, a.Remaining, accepted)
}
