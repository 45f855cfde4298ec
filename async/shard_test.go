package async_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/async/reconcile"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

// clusterEnv returns an env on the shared cluster under a fresh prefix.
func clusterEnv(t *testing.T) (*env, *testenv.Cluster) {
	c := testenv.SharedCluster(t)
	return envOnCluster(t, c), c
}

// deletePrefixAtEnd deletes the test's keys from the cluster when it ends.
func deletePrefixAtEnd(t testing.TB, client rueidis.Client, prefix string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := testenv.DeletePrefix(ctx, client, prefix); err != nil {
			t.Error(err)
		}
	})
}

// envOnCluster returns an env on the cluster under a fresh prefix.
func envOnCluster(t testing.TB, c *testenv.Cluster) *env {
	client := c.Client(t)
	prefix := "test:" + testenv.Unique() + ":"
	deletePrefixAtEnd(t, client, prefix)
	dsn, url := asynctest.MySQLDatabase(t)
	return newEnvOn(t, client, prefix, dsn, url)
}

// shardedVoucher creates a voucher of stock split into k shards.
func (e *env) shardedVoucher(stock, k int) *flashsale.Voucher {
	e.T.Helper()
	v := &flashsale.Voucher{Title: "sharded", Stock: stock, Shards: k,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Svc.CreateVoucher(ctx, v); err != nil {
		e.T.Fatalf("CreateVoucher: %v", err)
	}
	return v
}

// sellTo runs a sale with the consumer running: 256 buyers at a time
// each send attempts orders at once (double clicks). It returns the
// accepted orders, failing on a user with two and on refusals other than
// sold out, duplicate or busy.
func sellTo(t *testing.T, e *env, voucherID int64, users []int64, attempts int) (accepted []*flashsale.Order, busy int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	byUser := map[int64]int{}
	jobs := make(chan int64)
	click := func(u int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: voucherID, UserID: u})
		mu.Lock()
		defer mu.Unlock()
		switch asynctest.Code(err) {
		case "":
			accepted = append(accepted, o)
			byUser[u]++
		case flashsale.EBusy:
			busy++
		case flashsale.ESoldOut, flashsale.EDuplicateOrder:
		default:
			t.Errorf("PlaceOrder(%d, %d): %v", voucherID, u, err)
		}
	}
	for range 256 {
		wg.Go(func() {
			for u := range jobs {
				var clicks sync.WaitGroup
				for range attempts {
					clicks.Go(func() { click(u) })
				}
				clicks.Wait()
			}
		})
	}
	for _, u := range users {
		jobs <- u
	}
	close(jobs)
	wg.Wait()
	for u, n := range byUser {
		if n != 1 {
			t.Errorf("user %d got %d orders", u, n)
		}
	}
	return accepted, busy
}

// checkShardedSold checks a drained sharded sale: every unit sold once,
// Redis and MySQL agree, reconcile finds nothing, no move is left.
func (e *env) checkShardedSold(v *flashsale.Voucher, accepted []*flashsale.Order) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(accepted) != v.Stock {
		e.T.Errorf("%d orders accepted for a stock of %d", len(accepted), v.Stock)
	}
	got, err := e.Svc.FindVoucher(ctx, v.ID)
	if err != nil || got.Remaining != 0 || got.Orders != len(accepted) || got.Shards != v.Shards {
		e.T.Errorf("FindVoucher = %+v, %v; want remaining 0, %d orders, %d shards", got, err, len(accepted), v.Shards)
	}
	if list, err := e.Svc.FindVouchers(ctx, 0, 100); err != nil || len(list) == 0 || list[0].ID != v.ID ||
		list[0].Remaining != 0 || list[0].Orders != len(accepted) {
		e.T.Errorf("FindVouchers = %v, %v; want voucher %d first with remaining 0, %d orders", list, err, v.ID, len(accepted))
	}
	st, err := async.ReadState(ctx, e.Client, e.Prefix, v.ID)
	if err != nil || st.Stock != 0 || st.Held != len(accepted) || st.InitialStock != v.Stock {
		e.T.Errorf("ReadState = %+v, %v; want stock 0, %d buyers, initial %d", st, err, len(accepted), v.Stock)
	}
	e.CheckSold(&flashsale.Voucher{ID: v.ID, Stock: v.Stock}, accepted)
	rep, err := reconcile.New(e.Client, e.DB, reconcile.Config{Prefix: e.Prefix, Logger: e.Log}).Check(ctx, v.ID)
	if err != nil || len(rep.Diffs) > 0 || rep.Remaining != 0 || rep.Stock != 0 {
		e.T.Errorf("reconcile = %+v, %v; want no differences", rep, err)
	}
	for _, vk := range e.Keys.Shards(v.ID, v.Shards) {
		if n, err := e.Client.Do(ctx, e.Client.B().Hlen().Key(vk.Moves).Build()).AsInt64(); err != nil || n != 0 {
			e.T.Errorf("shard %s: %d moves left in its journal (%v)", vk.Body, n, err)
		}
	}
}

// TestShardedSale sells 2,000 units in 3 shards to 5,000 buyers sending 2
// orders each, with the consumer running, on the shared cluster (the
// shards on three masters) and on one node.
func TestShardedSale(t *testing.T) {
	const stock, buyers, attempts, k = 2000, 5000, 2, 3
	for _, topo := range []string{"cluster", "single"} {
		t.Run(topo, func(t *testing.T) {
			var e *env
			var c *testenv.Cluster
			if topo == "cluster" {
				e, c = clusterEnv(t)
			} else {
				e = newEnv(t)
			}
			v := e.shardedVoucher(stock, k)
			if c != nil {
				masters := map[*testenv.RedisServer]bool{}
				for _, vk := range e.Keys.Shards(v.ID, k) {
					masters[c.MasterOf(testenv.Slot(vk.Meta))] = true
				}
				if len(masters) != k {
					t.Errorf("the %d shards are on %d masters", k, len(masters))
				}
			}
			e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
			accepted, busy := sellTo(t, e, v.ID, asynctest.Users(1, buyers), attempts)
			t.Logf("%d accepted, %d answered busy", len(accepted), busy)
			e.WaitDrained(v.ID, len(accepted))
			e.checkShardedSold(v, accepted)
		})
	}
}

// TestShardedSaleSkewed sends every buyer to the same home shard: the
// other shards' stock must move to it until all of it is sold.
func TestShardedSaleSkewed(t *testing.T) {
	const stock, buyers, attempts, k = 2000, 3000, 2, 3
	e, _ := clusterEnv(t)
	v := e.shardedVoucher(stock, k)
	var skewed []int64
	for u := int64(1); len(skewed) < buyers; u++ {
		if layout.HomeShard(u, k) == 0 || u%10 == 0 { // 90%+ on shard 0
			skewed = append(skewed, u)
		}
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	accepted, busy := sellTo(t, e, v.ID, skewed, attempts)
	t.Logf("%d accepted, %d answered busy", len(accepted), busy)
	e.WaitDrained(v.ID, len(accepted))
	e.checkShardedSold(v, accepted)
}

// take runs step 1 of a move only, as a mover killed right after it.
func (e *env) take(from, to layout.VoucherKeys, id string) int64 {
	e.T.Helper()
	n, err := layout.Take(context.Background(), e.Client, from, to, id, 0)
	if err != nil || n == 0 {
		e.T.Fatalf("take.lua: %d, %v", n, err)
	}
	return n
}

// TestShardMoveRecovery kills movers between the steps of a move (runs
// only some steps) and checks no unit is lost: reconcile completes a move
// cut after step 1 exactly once, a move cut after step 2 is not added
// twice, and the next buyers complete the rest and sell every unit.
func TestShardMoveRecovery(t *testing.T) {
	const stock, k = 30, 3
	for _, topo := range []string{"cluster", "single"} {
		t.Run(topo, func(t *testing.T) {
			var e *env
			if topo == "cluster" {
				e, _ = clusterEnv(t)
			} else {
				e = newEnv(t)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			v := e.shardedVoucher(stock, k)
			shards := e.Keys.Shards(v.ID, k)
			remaining := func() int {
				got, err := e.Svc.FindVoucher(ctx, v.ID)
				if err != nil {
					t.Fatal(err)
				}
				return got.Remaining
			}
			// Killed after step 1: the units are in shard 1's journal.
			n := e.take(shards[1], shards[0], "dead.1")
			if r := remaining(); r != stock {
				t.Fatalf("remaining %d with %d units in a journal; want %d", r, n, stock)
			}
			rec := reconcile.New(e.Client, e.DB, reconcile.Config{Prefix: e.Prefix, Logger: e.Log})
			rep, err := rec.Repair(ctx, v.ID)
			if err != nil || rep.Moved != 1 || len(rep.Diffs) != 0 || rep.Stock != stock {
				t.Fatalf("Repair = %+v, %v; want 1 move completed, no differences, stock %d", rep, err, stock)
			}
			// Killed after step 2: added to shard 0, still in shard 2's
			// journal; completing it again must not add it twice.
			n = e.take(shards[2], shards[0], "dead.2")
			if ok, err := layout.CompleteMove(ctx, e.Client, shards[2], shards[0], "dead.2", n); err != nil || !ok {
				t.Fatal(ok, err)
			}
			e.Do(e.Client.B().Hset().Key(shards[2].Moves).FieldValue().FieldValue("dead.2", shards[0].Body+":"+strconv.FormatInt(n, 10)).Build())
			if r := remaining(); r != stock+int(n) {
				t.Fatalf("remaining %d (the move counted in shard 0 and in the journal); want %d", r, stock+int(n))
			}
			if rep, err := rec.Repair(ctx, v.ID); err != nil || rep.Moved != 1 || rep.Stock != stock {
				t.Fatalf("Repair = %+v, %v; want the move completed without adding it again, stock %d", rep, err, stock)
			}
			// Killed after step 1 again, left to the buyers.
			e.take(shards[0], shards[1], "dead.3")
			e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
			accepted, _ := sellTo(t, e, v.ID, asynctest.Users(1, 200), 1)
			e.WaitDrained(v.ID, len(accepted))
			e.checkShardedSold(v, accepted)
		})
	}
}

// TestShardedReloadAfterLoss deletes one shard's keys after a first sale,
// as a cluster node restarted empty does: the shard is reloaded with what
// MySQL leaves less what the other shards hold, so the sale then sells
// exactly the rest, nothing twice. The reload runs while nothing is
// persisted or sold, which makes its estimate exact (otherwise it errs
// towards selling less).
func TestShardedReloadAfterLoss(t *testing.T) {
	const stock, k = 300, 3
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	v := e.shardedVoucher(stock, k)
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	first, _ := sellTo(t, e, v.ID, asynctest.Users(1, 90), 1)
	e.WaitDrained(v.ID, len(first))
	stop()
	second, _ := sellTo(t, e, v.ID, asynctest.Users(91, 120), 1) // in the stream, not in MySQL
	lost := e.Keys.Shards(v.ID, k)[2]
	e.Do(e.Client.B().Del().Key(lost.Meta, lost.Buyers, lost.Orders).Build())
	u := int64(2000)
	for layout.HomeShard(u, k) != 2 {
		u++
	}
	trigger := e.Buy(v.ID, u) // reloads shard 2
	rest, _ := sellTo(t, e, v.ID, asynctest.Users(1, 1000), 1)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	// The loss took shard 2's orders in the stream; their units are sold
	// again, and every other unit once.
	var kept []*flashsale.Order
	for _, o := range second {
		if layout.HomeShard(o.UserID, k) != 2 {
			kept = append(kept, o)
		}
	}
	all := append(append(append(first, kept...), trigger...), rest...)
	if len(all) != stock || len(kept) == len(second) {
		t.Errorf("%d orders survive (%d of %d lost with shard 2); want %d, some lost", len(all), len(second)-len(kept), len(second), stock)
	}
	e.WaitDrained(v.ID, len(all))
	a, err := e.DB.AuditVoucher(ctx, v.ID)
	if err != nil || a.Orders != len(all) || a.Remaining != stock-len(all) || a.DistinctBuyers != len(all) {
		t.Errorf("MySQL = %+v, %v; want %d orders of distinct buyers", a, err, len(all))
	}
	if got, err := e.Svc.FindVoucher(ctx, v.ID); err != nil || got.Remaining != 0 {
		t.Errorf("FindVoucher = %+v, %v; want remaining 0", got, err)
	}
}

// TestShardedSaleWithoutMySQL: a fresh instance whose MySQL does not
// answer learns a loaded voucher's shards from Redis and sells on each
// buyer's home shard, so another instance refuses the same buyer.
func TestShardedSaleWithoutMySQL(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v := e.shardedVoucher(30, 3)
	down, err := store.Open(ctx, e.URL)
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	fresh, err := async.NewService(e.Client, down, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log})
	if err != nil {
		t.Fatal(err)
	}
	for u := int64(1); u <= 12; u++ {
		if _, err := fresh.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u}); err != nil {
			t.Fatalf("PlaceOrder(%d) without MySQL: %v", u, err)
		}
		if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u}); asynctest.Code(err) != flashsale.EDuplicateOrder {
			t.Fatalf("the same buyer %d through another instance: %v; want duplicate_order", u, err)
		}
	}
	if st, err := async.ReadState(ctx, e.Client, e.Prefix, v.ID); err != nil || st.Held != 12 || st.Stock != 18 {
		t.Errorf("ReadState = %+v, %v; want 12 buyers, 18 left", st, err)
	}
}
