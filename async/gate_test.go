package async_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
)

// status returns the order's status, or "" for no order.
func status(o *flashsale.Order) flashsale.OrderStatus {
	if o == nil {
		return ""
	}
	return o.Status
}

func TestPlaceOrderOutcomes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hour := time.Hour
	cases := []struct {
		name       string
		setup      func() (voucherID, userID int64)
		wantCode   string
		wantStatus flashsale.OrderStatus
	}{
		{"in neither Redis nor MySQL", func() (int64, int64) {
			return 987654321, 1
		}, flashsale.ENotFound, ""},
		{"in MySQL only: reloaded, then accepted", func() (int64, int64) {
			id, err := e.IDs.NextID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v := &flashsale.Voucher{ID: id, Title: "mysql only", Stock: 3, BeginTime: time.Now().Add(-hour), EndTime: time.Now().Add(hour)}
			if err := e.DB.CreateVoucher(ctx, v); err != nil {
				t.Fatal(err)
			}
			return v.ID, 1
		}, "", flashsale.StatusPending},
		{"not started", func() (int64, int64) {
			return e.Voucher(3, time.Now().Add(hour), time.Now().Add(2*hour)).ID, 1
		}, flashsale.ENotStarted, ""},
		{"ended", func() (int64, int64) {
			return e.Voucher(3, time.Now().Add(-2*hour), time.Now().Add(-hour)).ID, 1
		}, flashsale.EEnded, ""},
		{"sold out", func() (int64, int64) {
			v := e.Voucher(1)
			e.Buy(v.ID, 1)
			return v.ID, 2
		}, flashsale.ESoldOut, ""},
		{"duplicate", func() (int64, int64) {
			v := e.Voucher(3)
			e.Buy(v.ID, 1)
			return v.ID, 1
		}, flashsale.EDuplicateOrder, ""},
		{"accepted", func() (int64, int64) {
			return e.Voucher(3).ID, 1
		}, "", flashsale.StatusPending},
		{"user id not positive", func() (int64, int64) {
			return e.Voucher(3).ID, 0
		}, flashsale.EInvalid, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			voucherID, userID := tc.setup()
			o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: voucherID, UserID: userID})
			if asynctest.Code(err) != tc.wantCode || status(o) != tc.wantStatus {
				t.Errorf("PlaceOrder = %+v, %v; want code %q, status %q", o, err, tc.wantCode, tc.wantStatus)
			}
		})
	}
}

func TestAcceptedOrderIsPendingUntilPersisted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(5)
	o := e.Buy(v.ID, 42)[0]
	if o.VoucherID != v.ID || o.UserID != 42 || o.ID <= 0 || o.CreatedAt.IsZero() {
		t.Errorf("accepted order = %+v", o)
	}
	found, err := e.Svc.FindOrder(ctx, o.ID)
	if err != nil || found.Status != flashsale.StatusPending || found.UserID != 42 || found.VoucherID != v.ID {
		t.Errorf("FindOrder before the consumer = %+v, %v; want pending", found, err)
	}
	got, err := e.Svc.FindVoucher(ctx, v.ID)
	if err != nil || got.Remaining != 4 || got.Orders != 1 || got.Stock != 5 || got.Title != v.Title {
		t.Errorf("FindVoucher = %+v, %v; want remaining 4 and 1 order from Redis", got, err)
	}
	_, err = e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 42})
	if asynctest.Code(err) != flashsale.EDuplicateOrder || !strings.Contains(flashsale.ErrorMessage(err), itoa(o.ID)) {
		t.Errorf("second order = %v; want EDuplicateOrder naming order %d", err, o.ID)
	}
	if _, err := e.Svc.FindOrder(ctx, o.ID+1_000_000); asynctest.Code(err) != flashsale.ENotFound {
		t.Errorf("FindOrder of an unknown id = %v; want ENotFound", err)
	}

	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 1)
	found, err = e.Svc.FindOrder(ctx, o.ID)
	if err != nil || found.Status != flashsale.StatusCreated {
		t.Errorf("FindOrder after the consumer = %+v, %v; want created", found, err)
	}
	if !found.CreatedAt.Equal(o.CreatedAt) {
		t.Errorf("persisted CreatedAt %v, want the gate's %v", found.CreatedAt, o.CreatedAt)
	}
}

func TestFindVoucherNotLoadedShowsMySQL(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(10)
	e.Buy(v.ID, 1, 2, 3)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 3)
	vk := e.Keys.Voucher(v.ID)
	e.Do(e.Client.B().Del().Key(vk.Meta, vk.Buyers).Build())
	got, err := e.Svc.FindVoucher(ctx, v.ID)
	if err != nil || got.Remaining != 7 || got.Orders != 3 {
		t.Errorf("FindVoucher of a voucher not in Redis = %+v, %v; want MySQL's remaining 7 and 3 orders", got, err)
	}
	if _, err := e.Svc.FindVoucher(ctx, 987654321); asynctest.Code(err) != flashsale.ENotFound {
		t.Errorf("FindVoucher of an unknown voucher = %v; want ENotFound", err)
	}
}

func TestWindowIsDecidedByRedisTime(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := asynctest.RedisTime(t, e.Client)
	begin, end := now.Add(2*time.Second), now.Add(3*time.Second)
	v := e.Voucher(10, begin, end)

	_, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1})
	if asynctest.Code(err) != flashsale.ENotStarted || flashsale.RetryAfter(err) <= 0 || flashsale.RetryAfter(err) > 2*time.Second {
		t.Fatalf("before the window = %v (retry after %v); want ENotStarted within 2s", err, flashsale.RetryAfter(err))
	}
	e.WaitFor("Redis's clock to reach the start", 10*time.Second, func() (bool, error) {
		return !asynctest.RedisTime(t, e.Client).Before(begin), nil
	})
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); err != nil {
		t.Fatalf("inside the window: %v", err)
	}
	e.WaitFor("Redis's clock to reach the end", 10*time.Second, func() (bool, error) {
		return !asynctest.RedisTime(t, e.Client).Before(end), nil
	})
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2}); asynctest.Code(err) != flashsale.EEnded {
		t.Fatalf("after the window = %v; want EEnded", err)
	}
}

// TestNotStartedRetryAfterIsTheStart: while an instance remembers that a
// sale has not started, its refusals still tell clients to come back when
// the sale starts, not when the remembered verdict runs out.
func TestNotStartedRetryAfterIsTheStart(t *testing.T) {
	e := newEnv(t)
	now := asynctest.RedisTime(t, e.Client)
	v := e.Voucher(10, now.Add(time.Hour), now.Add(2*time.Hour))
	for i, user := range []int64{1, 2, 3} { // the first asks Redis, the others hit the verdict
		_, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: user})
		if asynctest.Code(err) != flashsale.ENotStarted || flashsale.RetryAfter(err) < 59*time.Minute || flashsale.RetryAfter(err) > time.Hour {
			t.Fatalf("order %d an hour before the sale = %v (retry after %v); want ENotStarted, retry after about an hour", i+1, err, flashsale.RetryAfter(err))
		}
	}
}

func TestSoldOutIsRememberedBriefly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var err error
	e.Svc, err = async.NewService(e.Client, e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log, VerdictTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	v := e.Voucher(1)
	e.Buy(v.ID, 1)
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2}); asynctest.Code(err) != flashsale.ESoldOut {
		t.Fatalf("after the last unit = %v; want ESoldOut", err)
	}
	// Give the unit back behind the instance's back, as reconciliation does.
	vk := e.Keys.Voucher(v.ID)
	e.Do(e.Client.B().Hincrby().Key(vk.Meta).Field("stock").Increment(1).Build())
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2}); asynctest.Code(err) != flashsale.ESoldOut {
		t.Fatalf("right after the give-back = %v; want ESoldOut from the local verdict", err)
	}
	e.WaitFor("the local verdict to expire", 10*time.Second, func() (bool, error) {
		_, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2})
		return err == nil, nil
	})
}

func TestConcurrentSaleSellsExactlyTheStock(t *testing.T) {
	const (
		stock    = 500
		buyers   = 2000
		attempts = 3 // per buyer, all at once
	)
	sellExactly(t, newEnv(t), stock, buyers, attempts)
}

// sellExactly runs a sale of stock and checks Redis and, once a consumer
// drained it, MySQL sold exactly the stock.
func sellExactly(t *testing.T, e *env, stock, buyers, attempts int) {
	t.Helper()
	v := e.Voucher(stock)
	accepted := e.Sell(v.ID, buyers, attempts)
	if len(accepted) != stock {
		t.Fatalf("%d orders accepted, want %d", len(accepted), stock)
	}
	if s, _, b := e.Snapshot(v.ID); s != 0 || b != int64(stock) {
		t.Errorf("Redis after the sale: stock %d, buyers %d; want 0 and %d", s, b, stock)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, stock)
	e.CheckSold(v, accepted)
}

// TestConcurrentSaleOnCluster runs the same sale on a Redis Cluster,
// consumer included: the gate's keys, the stream and the consumer group
// live on the master of the voucher's slot, the registry and the order
// pointers on others.
func TestConcurrentSaleOnCluster(t *testing.T) {
	const stock, buyers, attempts = 500, 2000, 3
	c := testenv.SharedCluster(t)
	client, prefix := c.PrefixedClient(t)
	dsn, url := asynctest.MySQLDatabase(t)
	sellExactly(t, newEnvOn(t, client, prefix, dsn, url), stock, buyers, attempts)
}

func TestCreateVoucherUndoesMySQLWhenRedisFails(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	broken, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		t.Fatal(err)
	}
	broken.Close()
	svc, err := async.NewService(broken, e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log})
	if err != nil {
		t.Fatal(err)
	}
	v := &flashsale.Voucher{Title: "never", Stock: 5, BeginTime: time.Now(), EndTime: time.Now().Add(time.Hour)}
	err = svc.CreateVoucher(ctx, v)
	if asynctest.Code(err) != flashsale.EUnavailable {
		t.Fatalf("CreateVoucher with Redis down = %v; want EUnavailable", err)
	}
	if _, err := e.DB.FindVoucher(ctx, v.ID); asynctest.Code(err) != flashsale.ENotFound {
		t.Errorf("voucher %d in MySQL after the failed create: %v; want ENotFound", v.ID, err)
	}
}

func TestReloadAfterRedisLossFromTwoInstances(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(100)
	before := e.Buy(v.ID, asynctest.Users(1, 30)...)
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 30)
	stop()
	// Redis loses the voucher; two instances meet it again at once.
	vk := e.Keys.Voucher(v.ID)
	e.Do(e.Client.B().Del().Key(vk.Meta, vk.Buyers, vk.Orders).Build())
	other, err := async.NewService(e.Client, e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log})
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted []*flashsale.Order
	)
	for u := int64(1); u <= 200; u++ {
		for _, svc := range []*async.Service{e.Svc, other} {
			wg.Go(func() {
				o, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
				if err == nil {
					mu.Lock()
					accepted = append(accepted, o)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if len(accepted) != 70 {
		t.Fatalf("%d orders accepted after the reload, want the 70 MySQL had left", len(accepted))
	}
	for _, o := range accepted {
		if o.UserID <= 30 {
			t.Errorf("user %d bought again after the reload", o.UserID)
		}
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 100)
	e.CheckSold(v, append(before, accepted...))
}

func TestReloadCountsOrdersStillInTheStream(t *testing.T) {
	tests := []struct {
		name string
		lost func(vk layout.VoucherKeys) []string
	}{
		{"meta and buyers lost", func(vk layout.VoucherKeys) []string { return []string{vk.Meta, vk.Buyers} }},
		// The buyers survive: the stream's buyers are in them already.
		{"meta lost", func(vk layout.VoucherKeys) []string { return []string{vk.Meta} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			v := e.Voucher(10)
			accepted := e.Buy(v.ID, asynctest.Users(1, 4)...)
			// The stream, with 4 orders not persisted yet, survives.
			e.Do(e.Client.B().Del().Key(tt.lost(e.Keys.Voucher(v.ID))...).Build())
			if err := e.Svc.Reload(context.Background(), v.ID); err != nil {
				t.Fatal(err)
			}
			if s, _, b := e.Snapshot(v.ID); s != 6 || b != 4 {
				t.Errorf("after the reload: stock %d, buyers %d; want 6 and 4", s, b)
			}
			if _, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); asynctest.Code(err) != flashsale.EDuplicateOrder {
				t.Errorf("a buyer whose order is in the stream ordered again: %v", err)
			}
			accepted = append(accepted, e.Buy(v.ID, asynctest.Users(5, 10)...)...)
			e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
			e.WaitDrained(v.ID, 10)
			e.CheckSold(v, accepted)
		})
	}
}

// TestPointerTTLUnderASecond: an order's pointer is written with a TTL
// under a second too (EX 0 would be refused, and the order not found by
// id until persisted).
func TestPointerTTLUnderASecond(t *testing.T) {
	e := newEnv(t)
	svc, err := async.NewService(e.Client, e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log, PointerTTL: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v := e.Voucher(1)
	o, err := svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: 1})
	if err != nil {
		t.Fatal(err)
	}
	bucket, _ := svc.Keys().Pointer(o.ID)
	pttl, err := e.Do(e.Client.B().Pttl().Key(bucket).Build()).AsInt64()
	if err != nil || pttl <= 0 || pttl > 500 {
		t.Fatalf("pointer PTTL = %d ms, %v; want in (0, 500]", pttl, err)
	}
}

// TestReloadReturnsWhenItsCallerStopsWaiting: a load that hangs (Redis
// silent) holds its callers no longer than their own deadline; the load
// itself goes on, bounded by its own timeout.
func TestReloadReturnsWhenItsCallerStopsWaiting(t *testing.T) {
	e := newEnv(t)
	v := e.Voucher(10)
	p := testenv.StartProxy(t)
	svc, err := async.NewService(p.Client(t), e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log})
	if err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	defer p.Thaw()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = svc.Reload(ctx, v.ID)
	if waited := time.Since(start); asynctest.Code(err) != flashsale.EUnavailable || waited > 2*time.Second {
		t.Fatalf("Reload with Redis silent = %v after %v; want unavailable once the 300ms deadline passed", err, waited)
	}
}

// TestConcurrentOrdersFindTheirPointers: pointers of orders accepted at
// once are written in shared batches; each order is found by id, pending,
// with its own voucher and user, as soon as PlaceOrder returned.
func TestConcurrentOrdersFindTheirPointers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	vouchers := []*flashsale.Voucher{e.Voucher(200), e.Voucher(200)}
	var wg sync.WaitGroup
	for u := range int64(300) {
		wg.Go(func() {
			v := vouchers[u%2]
			o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u + 1})
			if err != nil {
				t.Errorf("PlaceOrder(user %d): %v", u+1, err)
				return
			}
			found, err := e.Svc.FindOrder(ctx, o.ID)
			if err != nil || found.Status != flashsale.StatusPending || found.UserID != u+1 || found.VoucherID != v.ID {
				t.Errorf("FindOrder(%d) = %+v, %v; want pending for user %d of voucher %d", o.ID, found, err, u+1, v.ID)
			}
		})
	}
	wg.Wait()
}
