package async_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
)

// privateEnv is an env on a private redis-server of its own (the shared
// one is never reconfigured) and a fresh MySQL database.
func privateEnv(t testing.TB, opts ...testenv.ServerOption) (*env, *testenv.RedisServer) {
	t.Helper()
	srv := testenv.StartRedis(t, opts...)
	dsn, url := asynctest.MySQLDatabase(t)
	return newEnvOn(t, srv.Client(t), "fs:", dsn, url), srv
}

// config sets a directive on the env's private Redis.
func (e *env) config(name, value string) {
	e.T.Helper()
	e.Do(e.Client.B().ConfigSet().ParameterValue().ParameterValue(name, value).Build())
}

// usedMemory returns INFO memory's used_memory.
func (e *env) usedMemory() int64 {
	e.T.Helper()
	info, err := e.Do(e.Client.B().Info().Section("memory").Build()).ToString()
	if err != nil {
		e.T.Fatal(err)
	}
	var used int64
	for line := range strings.Lines(info) {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			used, _ = strconv.ParseInt(n, 10, 64)
		}
	}
	return used
}

// TestRedisFullRefusesWholeOrdersAndRecovers fills a private Redis
// (maxmemory, noeviction) mid-sale with many buyers at once: orders past the
// limit are answered unavailable with a retry hint, and Redis shows no
// partial write: every unit taken has its buyer and its stream entry,
// every buyer an accepted order. The consumer drains while Redis is full
// (acknowledging frees memory); once maxmemory is raised the sale goes on
// and sells exactly its stock.
func TestRedisFullRefusesWholeOrdersAndRecovers(t *testing.T) {
	e, _ := privateEnv(t, testenv.WithConfig("maxmemory-policy", "noeviction"))
	ctx := context.Background()
	const stock = 20000
	v := e.Voucher(stock)
	e.config("maxmemory", strconv.FormatInt(e.usedMemory()+512<<10, 10))

	// Sell with 16 buyers at a time until 50 orders were refused as full.
	var (
		mu       sync.Mutex
		accepted []*flashsale.Order
		next     atomic.Int64
		refused  atomic.Int64
		wg       sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for refused.Load() < 50 {
				u := next.Add(1)
				if u > stock {
					return
				}
				o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
				switch {
				case err == nil:
					mu.Lock()
					accepted = append(accepted, o)
					mu.Unlock()
				case asynctest.Code(err) == flashsale.EUnavailable && async.IsOOM(err):
					if flashsale.RetryAfter(err) <= 0 {
						t.Errorf("order refused as full without a retry hint: %v", err)
					}
					refused.Add(1)
				default:
					t.Errorf("PlaceOrder(%d): %v", u, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if refused.Load() < 50 {
		t.Fatalf("Redis never filled: %d refused, %d accepted", refused.Load(), len(accepted))
	}
	t.Logf("full after %d accepted orders; %d refused", len(accepted), refused.Load())
	e.checkWhole(v.ID, accepted)

	// While full, the consumer persists and acknowledges everything.
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, len(accepted))
	e.checkWhole(v.ID, accepted)

	// Memory raised: the sale goes on to the last unit, exactly.
	e.config("maxmemory", "0")
	for u := int64(stock + 1); len(accepted) < stock; u++ {
		accepted = append(accepted, e.Buy(v.ID, u)...)
	}
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2 * stock}); asynctest.Code(err) != flashsale.ESoldOut {
		t.Fatalf("an order past the stock: %v, want sold_out", err)
	}
	e.WaitDrained(v.ID, stock)
	e.CheckSold(v, accepted)
}

// checkWhole checks that Redis holds exactly the accepted orders and no
// part of another: stock + buyers = initial, the buyers are the accepted
// ones, and every buyer's order is in the stream or in MySQL.
func (e *env) checkWhole(voucherID int64, accepted []*flashsale.Order) {
	e.T.Helper()
	ctx := context.Background()
	stock, initial, buyers := e.Snapshot(voucherID)
	if stock+buyers != initial || int(buyers) != len(accepted) {
		e.T.Fatalf("Redis: stock %d + buyers %d, initial %d; %d accepted", stock, buyers, initial, len(accepted))
	}
	vk := e.Keys.Voucher(voucherID)
	byUser, err := e.Do(e.Client.B().Hgetall().Key(vk.Buyers).Build()).AsStrMap()
	if err != nil {
		e.T.Fatal(err)
	}
	entries, err := e.Do(e.Client.B().Xrange().Key(vk.Orders).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		e.T.Fatal(err)
	}
	queued := map[string]bool{}
	for _, en := range entries {
		for _, id := range layout.EntryOrderIDs(en.FieldValues) {
			queued[id] = true
		}
	}
	for _, o := range accepted {
		id := strconv.FormatInt(o.ID, 10)
		if _, latest := layout.ParseBuyer(byUser[strconv.FormatInt(o.UserID, 10)]); latest != id {
			e.T.Errorf("accepted order %d of user %d: buyers hash has %q", o.ID, o.UserID, byUser[strconv.FormatInt(o.UserID, 10)])
		}
		if queued[id] {
			continue
		}
		if _, err := e.DB.FindOrder(ctx, o.ID); err != nil {
			e.T.Errorf("accepted order %d is neither in the stream nor in MySQL: %v", o.ID, err)
		}
	}
	if len(queued) > len(accepted) {
		e.T.Errorf("%d orders in the stream for %d accepted orders", len(queued), len(accepted))
	}
}
