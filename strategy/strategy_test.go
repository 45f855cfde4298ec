package strategy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lock"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/strategy"
	"github.com/redis/rueidis"
)

type fixture struct {
	db     *store.DB
	prefix string // the Redis prefix of the ID generator and locks
	ids    *idgen.Generator
	locks  *lock.Client
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureOn(t, testenv.MySQLURL(t))
}

// newFixtureOn is newFixture on the database at url.
func newFixtureOn(t testing.TB, url string) *fixture {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	return newFixtureOnRedis(t, url, rc, prefix)
}

// newFixtureOnRedis is newFixtureOn with the ID generator and locks on rc,
// under prefix.
func newFixtureOnRedis(t testing.TB, url string, rc rueidis.Client, prefix string) *fixture {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ids := idgen.New(rc, "id", idgen.WithPrefix(prefix))
	t.Cleanup(ids.Close)
	locks := lock.New(rc, lock.WithPrefix(prefix+"lock:"))
	t.Cleanup(func() { locks.Close() })
	return &fixture{db: db, prefix: prefix, ids: ids, locks: locks}
}

func (f *fixture) strategy(t testing.TB, name string, raceWindow time.Duration) flashsale.OrderService {
	t.Helper()
	// LockWait is generous: a test of what a strategy sells must not turn
	// on how fast a loaded machine serves its queue of lock waiters.
	s, err := strategy.New(name, strategy.Config{DB: f.db, IDs: f.ids, Locks: f.locks, RaceWindow: raceWindow, LockWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (f *fixture) voucher(t testing.TB, stock int) int64 {
	t.Helper()
	v := &flashsale.Voucher{Title: "t", Stock: stock, BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour)}
	if err := strategy.NewVoucherService(f.db, f.ids, "conditional").CreateVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return v.ID
}

// sale sends one order per buyer, all at once, and counts the answers.
func sale(t *testing.T, s flashsale.OrderService, voucherID int64, buyers int) map[string]int {
	t.Helper()
	var (
		mu    sync.Mutex
		codes = map[string]int{}
		wg    sync.WaitGroup
	)
	for u := range buyers {
		wg.Go(func() {
			_, err := s.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: int64(u + 1)})
			code := flashsale.ErrorCode(err)
			if code == flashsale.EInternal {
				t.Errorf("buyer %d: internal error %v", u+1, err)
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}

// TestUnsafeStrategiesShowTheSeedsFailures runs each strategy with a race
// window, as seed 000 does, and checks the failure each one is known for —
// or its absence.
func TestUnsafeStrategiesShowTheSeedsFailures(t *testing.T) {
	const stock, buyers = 10, 40
	f := newFixture(t)
	ctx := context.Background()

	t.Run("naive loses updates and oversells", func(t *testing.T) {
		vid := f.voucher(t, stock)
		codes := sale(t, f.strategy(t, "naive", 20*time.Millisecond), vid, buyers)
		a, err := f.db.AuditVoucher(ctx, vid)
		if err != nil {
			t.Fatal(err)
		}
		if a.Orders <= stock-a.Remaining {
			t.Fatalf("naive: %d orders with %d of %d stock sold (answers %v); want more orders than stock sold", a.Orders, stock-a.Remaining, stock, codes)
		}
	})
	t.Run("mutex is safe on one instance", func(t *testing.T) {
		vid := f.voucher(t, stock)
		codes := sale(t, f.strategy(t, "mutex", 2*time.Millisecond), vid, buyers)
		a, err := f.db.AuditVoucher(ctx, vid)
		if err != nil {
			t.Fatal(err)
		}
		if a.Orders != stock || a.Remaining != 0 || codes[""] != stock {
			t.Fatalf("mutex: audit %+v answers %v; want exactly %d orders", a, codes, stock)
		}
	})
	t.Run("optimistic never oversells but refuses buyers while stock is left", func(t *testing.T) {
		vid := f.voucher(t, stock)
		codes := sale(t, f.strategy(t, "optimistic", 20*time.Millisecond), vid, buyers)
		a, err := f.db.AuditVoucher(ctx, vid)
		if err != nil {
			t.Fatal(err)
		}
		if a.Orders+a.Remaining != stock || a.Remaining == 0 || codes[flashsale.ESoldOut] == 0 {
			t.Fatalf("optimistic: audit %+v answers %v; want orders+remaining = %d with stock left and buyers refused", a, codes, stock)
		}
	})
	for _, name := range []string{"conditional", "lock", "stocklock", "batch"} {
		t.Run(name+" sells exactly the stock", func(t *testing.T) {
			vid := f.voucher(t, stock)
			codes := sale(t, f.strategy(t, name, 2*time.Millisecond), vid, buyers)
			a, err := f.db.AuditVoucher(ctx, vid)
			if err != nil {
				t.Fatal(err)
			}
			if a.Orders != stock || a.Remaining != 0 || a.DistinctBuyers != stock || codes[""] != stock || codes[flashsale.ESoldOut] != buyers-stock {
				t.Fatalf("%s: audit %+v answers %v", name, a, codes)
			}
		})
	}
}

// TestSafeStrategiesOnCluster runs conditional, lock and batch on a Redis
// Cluster (the order IDs and the per-buyer locks on it): each sells
// exactly the stock to as many buyers, and the lock strategy still lets one
// buyer's concurrent clicks take one order.
func TestSafeStrategiesOnCluster(t *testing.T) {
	const stock, buyers, clicks = 50, 200, 20
	c := testenv.SharedCluster(t)
	rc, prefix := c.PrefixedClient(t)
	f := newFixtureOnRedis(t, testenv.MySQLURL(t), rc, prefix)
	ctx := context.Background()
	for _, name := range []string{"conditional", "lock", "batch"} {
		t.Run(name, func(t *testing.T) {
			s := f.strategy(t, name, 2*time.Millisecond)
			vid := f.voucher(t, stock)
			codes := sale(t, s, vid, buyers)
			a, err := f.db.AuditVoucher(ctx, vid)
			if err != nil {
				t.Fatal(err)
			}
			if a.Orders != stock || a.Remaining != 0 || a.DistinctBuyers != stock || codes[""] != stock || codes[flashsale.ESoldOut] != buyers-stock {
				t.Fatalf("%s: audit %+v answers %v", name, a, codes)
			}
			vid = f.voucher(t, stock)
			var wg sync.WaitGroup
			for range clicks {
				wg.Go(func() { _, _ = s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: vid, UserID: 42}) })
			}
			wg.Wait()
			if a, err := f.db.AuditVoucher(ctx, vid); err != nil || a.Orders != 1 {
				t.Fatalf("%s: %d clicks of one buyer: audit %+v, %v; want one order", name, clicks, a, err)
			}
		})
	}
}

// TestOneOrderPerBuyer sends many concurrent clicks of one buyer: one
// order, and every other click refused. Repeats are refused as
// duplicate_order, except by optimistic, whose clicks that lose the
// compare-and-set to the buyer's own first order are refused as sold_out
// before they can see it, and by lock, which answers busy to a click that
// waited over a second for the buyer's lock.
func TestOneOrderPerBuyer(t *testing.T) {
	const clicks = 20
	f := newFixture(t)
	tests := []struct {
		name     string
		refusals []string
	}{
		{"naive", []string{flashsale.EDuplicateOrder}},
		{"mutex", []string{flashsale.EDuplicateOrder}},
		{"optimistic", []string{flashsale.EDuplicateOrder, flashsale.ESoldOut}},
		{"conditional", []string{flashsale.EDuplicateOrder}},
		{"lock", []string{flashsale.EDuplicateOrder, flashsale.EBusy}},
		{"stocklock", []string{flashsale.EDuplicateOrder, flashsale.EBusy}},
		{"batch", []string{flashsale.EDuplicateOrder}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vid := f.voucher(t, 100)
			s := f.strategy(t, tt.name, 0)
			var (
				mu    sync.Mutex
				codes = map[string]int{}
				wg    sync.WaitGroup
			)
			for range clicks {
				wg.Go(func() {
					_, err := s.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: vid, UserID: 42})
					mu.Lock()
					codes[flashsale.ErrorCode(err)]++
					mu.Unlock()
				})
			}
			wg.Wait()
			a, err := f.db.AuditVoucher(context.Background(), vid)
			if err != nil {
				t.Fatal(err)
			}
			refused := 0
			for _, c := range tt.refusals {
				refused += codes[c]
			}
			if a.Orders != 1 || codes[""] != 1 || refused != clicks-1 {
				t.Fatalf("audit %+v answers %v; want one order and the other clicks refused with one of %v", a, codes, tt.refusals)
			}
		})
	}
}

func TestSaleWindowAndUnknownVoucher(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mk := func(begin, end time.Time) int64 {
		v := &flashsale.Voucher{Title: "w", Stock: 1, BeginTime: begin, EndTime: end}
		if err := strategy.NewVoucherService(f.db, f.ids, "conditional").CreateVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	future := mk(time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	past := mk(time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	for _, name := range strategy.Names {
		s := f.strategy(t, name, 0)
		tests := []struct {
			voucher int64
			code    string
		}{{future, flashsale.ENotStarted}, {past, flashsale.EEnded}, {987654321, flashsale.ENotFound}}
		for _, tt := range tests {
			if _, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: tt.voucher, UserID: 1}); flashsale.ErrorCode(err) != tt.code {
				t.Errorf("%s: voucher %d: %v, want %s", name, tt.voucher, err, tt.code)
			}
		}
	}
}

func TestNewRejectsUnknownStrategy(t *testing.T) {
	f := newFixture(t)
	_, err := strategy.New("async-ish", strategy.Config{DB: f.db, IDs: f.ids})
	if err == nil {
		t.Fatal("unknown strategy accepted")
	}
	if _, err := strategy.New("lock", strategy.Config{DB: f.db, IDs: f.ids}); err == nil {
		t.Fatal("lock strategy without a lock client accepted")
	}
	if _, err := strategy.New("stocklock", strategy.Config{DB: f.db, IDs: f.ids}); err == nil {
		t.Fatal("stocklock strategy without a lock client or Locker accepted")
	}
}

// TestLockStrategyWithRedisDownIsUnavailable: when the lock's Redis
// refuses the lock client, the lock strategy refuses the order as
// unavailable, with a Retry-After, like the ID generator and the rate
// limiter do, and writes nothing. (A Redis that hangs instead runs out the
// lock wait, which is answered busy: the lock library reports a wait cut
// short by its context as the context's error.)
func TestLockStrategyWithRedisDownIsUnavailable(t *testing.T) {
	f := newFixture(t)
	vid := f.voucher(t, 5)
	down, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	locks := lock.New(down, lock.WithPrefix("unused:"))
	t.Cleanup(func() { locks.Close() })
	s, err := strategy.New("lock", strategy.Config{DB: f.db, IDs: f.ids, Locks: locks})
	if err != nil {
		t.Fatal(err)
	}

	_, err = s.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: vid, UserID: 1})
	fe, ok := errors.AsType[*flashsale.Error](err)
	if !ok || fe.Code != flashsale.EUnavailable || fe.RetryAfter <= 0 {
		t.Fatalf("PlaceOrder with the lock's Redis down: %v; want an unavailable error with a Retry-After", err)
	}
	a, err := f.db.AuditVoucher(context.Background(), vid)
	if err != nil {
		t.Fatal(err)
	}
	if a.Orders != 0 || a.Remaining != 5 {
		t.Fatalf("after the refusal: %d orders, %d remaining; want 0 and 5", a.Orders, a.Remaining)
	}
}
