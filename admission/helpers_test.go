package admission_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

var secret = []byte("0123456789abcdef0123456789abcdef-admission-test")

// env is a queue voucher in a real MariaDB and a Queue on real Redis.
type env struct {
	t      testing.TB
	ctx    context.Context
	db     *store.DB
	client rueidis.Client
	prefix string
	q      *admission.Queue
	v      *flashsale.Voucher
	// units is what Config.Units answers (the test sets it), and
	// mysqlReads counts the VoucherReader's reads.
	units      atomic.Int64
	mysqlReads atomic.Int64
}

var nextVoucher atomic.Int64

// countingReader counts the reads of the voucher rows: polls must make none.
type countingReader struct {
	db *store.DB
	n  *atomic.Int64
}

func (r countingReader) Voucher(ctx context.Context, id int64) (*flashsale.Voucher, error) {
	r.n.Add(1)
	return r.db.Voucher(ctx, id)
}

// newEnv creates a queue voucher with the stock and rate whose sale begins
// after beginIn, and a Queue over it.
func newEnv(t testing.TB, stock, rate int, beginIn time.Duration) *env {
	t.Helper()
	return newWindowEnv(t, stock, rate, time.Now().Add(beginIn), time.Now().Add(beginIn+time.Hour))
}

// newWindowEnv is newEnv for a sale from begin to end.
func newWindowEnv(t testing.TB, stock, rate int, begin, end time.Time) *env {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	client, prefix := testenv.Redis(t)
	e := &env{t: t, ctx: ctx, db: db, client: client, prefix: prefix}
	e.v = &flashsale.Voucher{ID: 1000 + nextVoucher.Add(1), Title: "queued", Stock: stock, BeginTime: begin, EndTime: end,
		Admission: flashsale.AdmissionQueue, AdmitPerSecond: rate}
	if err := db.CreateVoucher(ctx, e.v); err != nil {
		t.Fatal(err)
	}
	e.units.Store(int64(stock))
	e.q = e.newQueue(client)
	return e
}

// newQueue returns another Queue (another instance) on client.
func (e *env) newQueue(client rueidis.Client) *admission.Queue {
	q, err := admission.New(client, admission.Config{
		Prefix: e.prefix, Secret: secret, Vouchers: countingReader{e.db, &e.mysqlReads},
		Units:   func(context.Context, int64) (int, error) { return int(e.units.Load()), nil },
		PassTTL: time.Minute,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return q
}

func (e *env) join(user int64) *admission.Ticket {
	e.t.Helper()
	tk, err := e.q.Join(e.ctx, e.v.ID, user)
	if err != nil {
		e.t.Fatalf("join user %d: %v", user, err)
	}
	return tk
}

func (e *env) poll(user int64, ticket string) *admission.Ticket {
	e.t.Helper()
	tk, err := e.q.Poll(e.ctx, e.v.ID, user, ticket)
	if err != nil {
		e.t.Fatalf("poll user %d: %v", user, err)
	}
	return tk
}

// admitUntil runs admission steps until cond holds (or 20 s pass).
func (e *env) admitUntil(cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatal("admission did not get there in 20 s")
		}
		if _, err := e.q.Admit(e.ctx, e.v.ID); err != nil {
			e.t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// passID returns the pass id in a pass.
func passID(t testing.TB, pass string) int {
	t.Helper()
	f := strings.Split(pass, ".")
	if len(f) != 4 {
		t.Fatalf("pass %q has not 4 fields", pass)
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor sleeps until t.
func waitFor(t time.Time) { time.Sleep(time.Until(t)) }
