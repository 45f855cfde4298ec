// Package asynctest is the world the async pipeline's tests run in, shared
// by the tests of the gate (async), the consumer (async/consume) and the
// reconciler (async/reconcile): a Redis prefix, a fresh MySQL database, an
// ID generator and a gate on them, and the checks a drained sale must
// pass. Like internal/testenv it talks to real servers only.
//
// It may not import store (the pipeline depends on the domain alone), so
// the test package hands it store.Open (UseStore) before the first Env.
package asynctest

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/async/reconcile"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
)

// DB is what the pipeline and its tests use of the system of record:
// *store.DB.
type DB interface {
	async.VoucherStore
	consume.Persister
	reconcile.AuditStore
	InsertOrder(ctx context.Context, o *flashsale.Order, limit int) error
	SetRemaining(ctx context.Context, voucherID int64, n int) error
	Close() error
}

// open opens the store at a store URL (mysql://…) and applies its
// migrations: store.Open, from UseStore.
var open func(ctx context.Context, url string) (DB, error)

// UseStore makes every Env open its store with open (store.Open).
func UseStore[D DB](openStore func(ctx context.Context, url string) (D, error)) {
	open = func(ctx context.Context, url string) (DB, error) { return openStore(ctx, url) }
}

// Env is one test's world: a Redis prefix, a fresh MySQL database, an ID
// generator and a gate Service on them.
type Env struct {
	T      testing.TB
	Client rueidis.Client
	Prefix string
	Keys   layout.Keyspace
	URL    string  // the MySQL database as a store URL
	SQL    *sql.DB // the same database, for crafting rows by hand
	DB     DB
	IDs    *idgen.Slots
	Svc    *async.Service
	Log    *slog.Logger
}

// New returns an Env on the shared servers.
func New(t testing.TB) *Env {
	t.Helper()
	client, prefix := testenv.Redis(t)
	dsn, url := MySQLDatabase(t)
	return NewOn(t, client, prefix, dsn, url)
}

// NewOn returns an Env on the given Redis prefix and MySQL database.
func NewOn(t testing.TB, client rueidis.Client, prefix, dsn, url string) *Env {
	t.Helper()
	if open == nil {
		t.Fatal("asynctest: no store: the test package calls UseStore(store.Open)")
	}
	e := &Env{T: t, Client: client, Prefix: prefix, Keys: layout.New(prefix), URL: url, Log: Logger(t)}
	var err error
	if e.DB, err = open(context.Background(), url); err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { e.DB.Close() })
	if e.SQL, err = sql.Open("mysql", dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.SQL.Close() })
	e.IDs = idgen.NewSlots(client, "order", idgen.WithPrefix(prefix+"idgen:"), idgen.WithLogger(e.Log))
	t.Cleanup(e.IDs.Close)
	// The voucher ids' slot's first range waits for the next second (a new
	// hash): here, not in a test's sale window.
	if _, err := e.IDs.NextID(context.Background()); err != nil {
		t.Fatal(err)
	}
	if e.Svc, err = async.NewService(client, e.DB, e.Config()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	svc := e.Svc // a test may put another service in e.Svc
	go func() { defer close(done); svc.WatchReturns(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// Config returns the gate's Config on the Env's prefix, IDs and logger.
func (e *Env) Config() async.Config {
	// MaxPending, MaxGateWait: the tests' crowds (thousands of goroutines
	// at once, under -race on shared cores) are not the overload the
	// bounds are for; TestGateAnswersBusyOverItsBound and
	// TestSlowGateAnswersBusyPastItsWait set their own.
	return async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log, MaxPending: 1 << 20, MaxGateWait: time.Hour}
}

// MySQLDatabase creates a fresh test database and returns it as a DSN and
// as a store URL.
func MySQLDatabase(t testing.TB) (dsn, url string) {
	t.Helper()
	dsn = testenv.MySQL(t)
	// user[:pass]@tcp(host:port)/name?params -> mysql://user[:pass]@host:port/name
	userinfo, rest, _ := strings.Cut(dsn, "@tcp(")
	hostport, rest, _ := strings.Cut(rest, ")/")
	name, _, _ := strings.Cut(rest, "?")
	return dsn, fmt.Sprintf("mysql://%s@%s/%s", userinfo, hostport, name)
}

// Logger logs warnings and errors to the test's output.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// ConsumerConfig is a consume.Config on the Env's prefix with the short
// intervals tests want.
func (e *Env) ConsumerConfig() consume.Config {
	return consume.Config{
		Prefix:    e.Prefix,
		Block:     100 * time.Millisecond,
		ClaimIdle: time.Second,
		Refresh:   100 * time.Millisecond,
		RetryMin:  20 * time.Millisecond,
		RetryMax:  500 * time.Millisecond,
		Logger:    e.Log,
	}
}

// Run starts c until the test ends (or the returned stop is called).
func (e *Env) Run(c *consume.Consumer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.T.Errorf("Consumer.Run: %v", err)
			}
		})
	}
	e.T.Cleanup(stop)
	return stop
}

// Reconciler returns a Reconciler on the Env's Redis, store and prefix.
func (e *Env) Reconciler() *reconcile.Reconciler {
	return reconcile.New(e.Client, e.DB, reconcile.Config{Prefix: e.Prefix, Logger: e.Log})
}

// Voucher creates a voucher through the Service, open for an hour unless
// a window (begin, end) is given.
func (e *Env) Voucher(stock int, window ...time.Time) *flashsale.Voucher {
	e.T.Helper()
	begin, end := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	if len(window) == 2 {
		begin, end = window[0], window[1]
	}
	v := &flashsale.Voucher{Title: "test voucher", Stock: stock, BeginTime: begin, EndTime: end}
	if err := e.Svc.CreateVoucher(context.Background(), v); err != nil {
		e.T.Fatalf("CreateVoucher: %v", err)
	}
	return v
}

// Buy places an order of the voucher for each user and returns them;
// every order must be accepted.
func (e *Env) Buy(voucherID int64, users ...int64) []*flashsale.Order {
	e.T.Helper()
	orders := make([]*flashsale.Order, len(users))
	for i, u := range users {
		o, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: u})
		if err != nil {
			e.T.Fatalf("PlaceOrder(%d, %d): %v", voucherID, u, err)
		}
		orders[i] = o
	}
	return orders
}

// Users returns the user ids from..to.
func Users(from, to int64) []int64 {
	var us []int64
	for u := from; u <= to; u++ {
		us = append(us, u)
	}
	return us
}

// WaitFor polls cond until it holds, failing the test after timeout. The
// timeout only bounds a hang; nothing asserts on speed.
func (e *Env) WaitFor(what string, timeout time.Duration, cond func() (bool, error)) {
	e.T.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			e.T.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("waiting for %s: still not so after %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitDrained waits until the backlog is 0 and MySQL holds n orders of the
// voucher.
func (e *Env) WaitDrained(voucherID int64, n int) {
	e.T.Helper()
	e.WaitFor(fmt.Sprintf("%d orders of voucher %d in MySQL", n, voucherID), 60*time.Second, func() (bool, error) {
		b, err := e.Svc.Backlog(context.Background())
		if err != nil || b > 0 {
			return false, err
		}
		a, err := e.DB.AuditVoucher(context.Background(), voucherID)
		return a.Orders == n, err
	})
}

// Code returns the flashsale error code of err.
func Code(err error) string { return flashsale.ErrorCode(err) }
