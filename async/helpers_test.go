package async

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
	"github.com/redis/rueidis"
)

// env is one test's world: a Redis prefix, a fresh MySQL database, an ID
// generator and a Service on them.
type env struct {
	t      testing.TB
	client rueidis.Client
	prefix string
	url    string  // the MySQL database as a store URL
	sql    *sql.DB // the same database, for crafting rows by hand
	db     *store.DB
	ids    *idgen.Generator
	svc    *Service
	log    *slog.Logger
}

// newEnv sets up an env on the shared servers.
func newEnv(t testing.TB) *env {
	t.Helper()
	client, prefix := testenv.Redis(t)
	dsn, url := mysqlDatabase(t)
	return newEnvOn(t, client, prefix, dsn, url)
}

// newEnvOn sets up an env on the given Redis prefix and MySQL database.
func newEnvOn(t testing.TB, client rueidis.Client, prefix, dsn, url string) *env {
	t.Helper()
	e := &env{t: t, client: client, prefix: prefix, url: url, log: testLogger(t)}
	var err error
	if e.db, err = store.Open(context.Background(), url); err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { e.db.Close() })
	if e.sql, err = sql.Open("mysql", dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.sql.Close() })
	e.ids = idgen.New(client, "order", idgen.WithPrefix(prefix+"idgen:"), idgen.WithLogger(e.log))
	t.Cleanup(e.ids.Close)
	e.svc, err = NewService(client, e.db, Config{Prefix: prefix, OrderIDs: e.ids, Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// mysqlDatabase creates a fresh test database and returns it as a DSN and
// as a store URL.
func mysqlDatabase(t testing.TB) (dsn, url string) {
	t.Helper()
	dsn = testenv.MySQL(t)
	// user[:pass]@tcp(host:port)/name?params -> mysql://user[:pass]@host:port/name
	userinfo, rest, _ := strings.Cut(dsn, "@tcp(")
	hostport, rest, _ := strings.Cut(rest, ")/")
	name, _, _ := strings.Cut(rest, "?")
	return dsn, fmt.Sprintf("mysql://%s@%s/%s", userinfo, hostport, name)
}

// testLogger logs warnings and errors to the test's output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// consumerConfig is a ConsumerConfig on the env's prefix with the short
// intervals tests want.
func (e *env) consumerConfig() ConsumerConfig {
	return ConsumerConfig{
		Prefix:    e.prefix,
		Block:     100 * time.Millisecond,
		ClaimIdle: time.Second,
		Refresh:   100 * time.Millisecond,
		RetryMin:  20 * time.Millisecond,
		RetryMax:  500 * time.Millisecond,
		Logger:    e.log,
	}
}

// run starts c until the test ends (or the returned stop is called).
func (e *env) run(c *Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("Consumer.Run: %v", err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// voucher creates a voucher through the Service, open for an hour unless
// a window is given.
func (e *env) voucher(stock int, window ...time.Time) *flashsale.Voucher {
	e.t.Helper()
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	if len(window) == 2 {
		begin, end = window[0], window[1]
	}
	v := &flashsale.Voucher{Title: "test voucher", Stock: stock, BeginTime: begin, EndTime: end}
	if err := e.svc.CreateVoucher(context.Background(), v); err != nil {
		e.t.Fatalf("CreateVoucher: %v", err)
	}
	return v
}

// buy places orders for users 1..n of the voucher and returns them; every
// order must be accepted.
func (e *env) buy(voucherID int64, users ...int64) []*flashsale.Order {
	e.t.Helper()
	orders := make([]*flashsale.Order, len(users))
	for i, u := range users {
		o, err := e.svc.PlaceOrder(context.Background(), voucherID, u)
		if err != nil {
			e.t.Fatalf("PlaceOrder(%d, %d): %v", voucherID, u, err)
		}
		orders[i] = o
	}
	return orders
}

// users returns the user ids from..to.
func users(from, to int64) []int64 {
	var us []int64
	for u := from; u <= to; u++ {
		us = append(us, u)
	}
	return us
}

// waitFor polls cond until it holds, failing the test after timeout. The
// timeout only bounds a hang; nothing asserts on speed.
func (e *env) waitFor(what string, timeout time.Duration, cond func() (bool, error)) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			e.t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("waiting for %s: still not so after %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitDrained waits until the backlog is 0 and MySQL holds n orders of the
// voucher.
func (e *env) waitDrained(voucherID int64, n int) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("%d orders of voucher %d in MySQL", n, voucherID), 60*time.Second, func() (bool, error) {
		b, err := e.svc.Backlog(context.Background())
		if err != nil || b > 0 {
			return false, err
		}
		a, err := e.db.AuditVoucher(context.Background(), voucherID)
		return a.Orders == n, err
	})
}

// snapshot returns Redis's stock, initial stock and buyer count (summed
// over the voucher's shards).
func (e *env) snapshot(voucherID int64) (stock, initial, buyers int64) {
	e.t.Helper()
	ctx := context.Background()
	n, err := shardCount(ctx, e.client, e.svc.keys, voucherID)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := voucherSnapshot(ctx, e.client, e.svc.keys, voucherID, n)
	if err != nil || !s.loaded {
		e.t.Fatalf("snapshot of voucher %d: %+v %v", voucherID, s, err)
	}
	return int64(s.stock), int64(s.initialStock), int64(s.buyers)
}

// do runs a Redis command, failing the test on an error.
func (e *env) do(cmd rueidis.Completed) rueidis.RedisResult {
	e.t.Helper()
	r := e.client.Do(context.Background(), cmd)
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		e.t.Fatalf("Redis: %v", err)
	}
	return r
}

// deadLetters returns the voucher's dead-letter entries.
func (e *env) deadLetters(voucherID int64) []rueidis.XRangeEntry {
	e.t.Helper()
	dead, err := e.do(e.client.B().Xrange().Key(e.svc.keys.voucher(voucherID).dead).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		e.t.Fatal(err)
	}
	return dead
}

// deliver reads up to n new entries of the voucher's stream as consumer
// name, without acknowledging them: a consumer that dies after reading.
func (e *env) deliver(voucherID int64, name string, n int64) []rueidis.XRangeEntry {
	e.t.Helper()
	key := e.svc.keys.voucher(voucherID).orders
	res, err := e.do(e.client.B().Xreadgroup().Group(DefaultGroup, name).Count(n).Streams().Key(key).Id(">").Build()).AsXRead()
	if err != nil {
		e.t.Fatal(err)
	}
	return res[key]
}

// checkSold checks the end state of a drained sale in both stores: Redis
// stock and buyers, and MySQL orders matching the accepted ones exactly.
func (e *env) checkSold(v *flashsale.Voucher, accepted []*flashsale.Order) {
	e.t.Helper()
	ctx := context.Background()
	stock, initial, buyers := e.snapshot(v.ID)
	if stock+buyers != initial || int(buyers) != len(accepted) {
		e.t.Errorf("Redis: stock %d + buyers %d, initial %d; want %d buyers", stock, buyers, initial, len(accepted))
	}
	a, err := e.db.AuditVoucher(ctx, v.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	want := flashsale.Audit{Stock: v.Stock, Remaining: v.Stock - len(accepted), Orders: len(accepted), DistinctBuyers: len(accepted)}
	if a != want {
		e.t.Errorf("MySQL audit = %+v, want %+v", a, want)
	}
	for _, o := range accepted {
		got, err := e.db.FindOrder(ctx, o.ID)
		if err != nil {
			e.t.Errorf("accepted order %d: %v", o.ID, err)
			continue
		}
		if got.Status != flashsale.StatusCreated || got.UserID != o.UserID || got.VoucherID != v.ID {
			e.t.Errorf("order %d in MySQL = %+v, accepted as %+v", o.ID, got, o)
		}
	}
}

// code returns the flashsale error code of err.
func code(err error) string { return flashsale.ErrorCode(err) }
