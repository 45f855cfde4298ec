package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// The durability tests run one serve process in a durability mode, with
// no consumer until the fault is over (every accepted order lives only in
// Redis meanwhile), on a private Redis; sell stock 2,000 to 3,000 buyers
// (two clicks each, then retries for clicks that met the fault) through
// HTTP; break Redis when about half the stock is accepted; then start a
// consumer, drain, and audit: every order a buyer was told about — accepted,
// or named by a duplicate_order refusal — must be created in MySQL, unless
// the mode allows losing it.
const (
	durabilityStock = 2000
	durabilityUsers = 3000
)

// redisFault is a Redis topology and the fault a test causes in it.
type redisFault struct {
	url    string
	client rueidis.Client
	// strike breaks Redis; it runs on a buyer's goroutine, so it must not
	// fail the test. recover runs on the test's goroutine after it and
	// returns once Redis serves again.
	strike, recover func()
}

// killedRedis is one Redis node, SIGKILLed and restarted on its files.
func killedRedis(t *testing.T, opts ...testenv.ServerOption) redisFault {
	srv := testenv.StartRedis(t, opts...)
	return redisFault{url: srv.URL(), client: srv.Client(t), strike: srv.Kill, recover: func() {
		time.Sleep(300 * time.Millisecond) // down for a while
		srv.Start()
	}}
}

// failedOver is a primary, its replica and three Sentinels. The replica
// is made to lag: it is paused (SIGSTOP) and its link is cut on the
// primary (CLIENT KILL TYPE replica), the sale goes on on the primary alone
// for replicaLag, then the primary is SIGKILLed and the replica resumed,
// so the Sentinels promote a replica that misses the last orders. The old
// primary comes back as the new one's replica (until then durability
// replica has no replica to wait for, and accepts nothing).
func failedOver(t *testing.T) redisFault {
	set := testenv.StartSentinelSet(t)
	old, replica := set.Primary(), set.Replica()
	admin := old.Client(t)
	strike := func() {
		replica.Pause()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := admin.Do(ctx, admin.B().Arbitrary("CLIENT", "KILL").Args("TYPE", "replica").Build()).Error()
		cancel()
		if err != nil {
			t.Logf("cutting the replica's link: %v", err) // it lags anyway while paused
		}
		// The buyers wait for strike to return (sync.Once), so the rest runs
		// beside them.
		go func() {
			time.Sleep(replicaLag)
			old.Kill()
			replica.Resume()
		}()
	}
	return redisFault{url: set.URL(), client: set.Client(t), strike: strike, recover: func() {
		set.WaitFailover(t, old.Addr(), 60*time.Second)
		old.Start()
		set.WaitReplicaSync(t)
	}}
}

// replicaLag is how long the primary takes orders its replica never gets:
// shorter than the Sentinels' down-after (2s), so the paused replica is
// never seen down and is promoted.
const replicaLag = 300 * time.Millisecond

// durabilitySale is what a durability test found.
type durabilitySale struct {
	s         *sale
	lost      int // orders the buyers were told about and MySQL does not have
	serveLog  string
	reconcile string // what flashsale reconcile printed after the sale
}

// runDurabilitySale runs the sale in the mode under the fault and audits
// what must hold in every mode: the sale went on, nothing oversold, one
// order per buyer in MySQL, stock sold out on both sides.
func runDurabilitySale(t *testing.T, mode string, f redisFault) durabilitySale {
	r := newSaleRig(t, testenv.MySQLURL(t))
	r.redisURL, r.redis = f.url, f.client
	r.extra = []string{"--durability", mode, "--replica-timeout", "2s"}
	srv := r.serve(false)
	r.createStock(srv.URL, durabilityStock)
	s := &sale{accepted: map[int64]int64{}, named: map[int64]int64{}, codes: map[string]int{}}
	targets := func() []string { return []string{srv.URL} }
	users := userRange(1, durabilityUsers)

	struck, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r.buy(s, users, targets, durabilityStock/2, func() { f.strike(); close(struck) })
	}()
	select {
	case <-struck:
	case <-done:
		t.Fatalf("the sale ended before the fault: %d accepted", len(s.accepted))
	}
	f.recover()
	<-done
	// Buyers whose clicks met the fault try again, as people do, until a
	// round meets no error.
	for range 5 {
		before := s.codes[flashsale.EUnavailable] + s.failures
		r.buy(s, users, targets, math.MaxInt, nil)
		if s.codes[flashsale.EUnavailable]+s.failures == before {
			break
		}
	}
	r.consume()
	lost := r.audit(s)
	out, err := os.ReadFile(srv.Log)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := r.command("reconcile").CombinedOutput()
	if err != nil {
		t.Errorf("reconcile: %v\n%s", err, rec)
	}
	return durabilitySale{s: s, lost: lost, serveLog: string(out), reconcile: string(rec)}
}

// audit waits for the pipeline to drain, checks what every mode keeps,
// and returns how many orders the buyers were told about that MySQL does
// not have.
func (r *saleRig) audit(s *sale) (lost int) {
	r.t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, r.dbURL)
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	if err := lab.NewAuditor(db, r.redis, r.prefix).Drain(ctx, r.voucher, 120*time.Second); err != nil {
		r.t.Fatal(err)
	}
	st, err := async.ReadState(ctx, r.redis, r.prefix, r.voucher)
	if err != nil {
		r.t.Fatal(err)
	}
	a, err := db.AuditVoucher(ctx, r.voucher)
	if err != nil {
		r.t.Fatal(err)
	}
	missing := map[int64]bool{} // an order can be both accepted and named
	for _, told := range []map[int64]int64{s.accepted, s.named} {
		for id, user := range told {
			o, err := db.FindOrder(ctx, id)
			if flashsale.ErrorCode(err) == flashsale.ENotFound {
				missing[id] = true
				continue
			}
			if err != nil || o.UserID != user || o.Status != flashsale.StatusCreated {
				r.t.Errorf("order %d of user %d: %+v, %v; want it created", id, user, o, err)
			}
		}
	}
	lost = len(missing)
	r.t.Logf("told accepted %d, named by duplicate_order %d, refused %v, transport errors %d; lost %d; Redis %+v; MySQL %+v",
		len(s.accepted), len(s.named), s.codes, s.failures, lost, st, a)
	if a.Orders != durabilityStock || a.DistinctBuyers != durabilityStock || a.DuplicateBuyers != 0 || a.Remaining != 0 {
		r.t.Errorf("MySQL: %+v; want %d orders by as many buyers, none left, none oversold", a, durabilityStock)
	}
	if st.Held != durabilityStock || st.Stock != 0 || st.DeadLetters != 0 {
		r.t.Errorf("Redis: %+v; want %d buyers, no stock left, no dead letters", st, durabilityStock)
	}
	return lost
}

// lossless checks that a mode that promises it lost nothing, and that no
// buyer was told about two orders.
func (d durabilitySale) lossless(t *testing.T) {
	t.Helper()
	if d.lost != 0 {
		t.Errorf("%d orders the buyers were told about are not in MySQL", d.lost)
	}
	buyers := map[int64]bool{}
	for _, u := range d.s.accepted {
		if buyers[u] {
			t.Errorf("user %d was told two orders were accepted", u)
		}
		buyers[u] = true
	}
}

// TestDurabilityAOFRedisKilled: durability aof; redis-server (appendonly
// yes, appendfsync always) is SIGKILLed mid-sale and restarted on its AOF:
// nothing accepted is lost.
func TestDurabilityAOFRedisKilled(t *testing.T) {
	runDurabilitySale(t, "aof", killedRedis(t, testenv.WithAOF())).lossless(t)
}

// TestDurabilityReplicaFailover: durability replica; the primary is
// SIGKILLed mid-sale and Sentinel promotes the replica: nothing accepted
// is lost.
func TestDurabilityReplicaFailover(t *testing.T) {
	runDurabilitySale(t, "replica", failedOver(t)).lossless(t)
}

// TestDurabilityMemoryRedisKilled: durability memory; redis-server without
// AOF is SIGKILLed mid-sale and restarts empty. The orders accepted before
// (none persisted: no consumer ran) are lost, and the service says so; it
// reloads the voucher from MySQL and sells on without overselling.
func TestDurabilityMemoryRedisKilled(t *testing.T) {
	d := runDurabilitySale(t, "memory", killedRedis(t))
	if d.lost == 0 {
		t.Error("no accepted order lost: the fault did not hit what memory mode cannot keep")
	}
	if !strings.Contains(d.serveLog, "ACCEPTED ORDERS LOST") {
		t.Error("serve did not log the loss")
	}
	if !strings.Contains(d.serveLog, "durability memory: an order is accepted once Redis holds it in memory") {
		t.Error("serve did not log what durability memory risks at start")
	}
}

// TestDurabilityMemoryFailover: durability memory; the replica lags (see
// failedOver), the primary is SIGKILLed mid-sale and Sentinel promotes the
// replica. The orders it had not received are lost; the service notices
// Redis went back in time, logs it with a lower bound that holds, records
// it for reconcile, and sells on without overselling.
func TestDurabilityMemoryFailover(t *testing.T) {
	d := runDurabilitySale(t, "memory", failedOver(t))
	t.Logf("lost in the failover: %d", d.lost)
	if d.lost == 0 {
		t.Error("no accepted order lost: the replica did not lag")
	}
	bounds := regexp.MustCompile(`REDIS LOST ACCEPTED ORDERS.* at_least=(\d+)`).FindAllStringSubmatch(d.serveLog, -1)
	if len(bounds) == 0 {
		t.Fatalf("serve did not notice that Redis went back in time:\n%s", d.serveLog)
	}
	t.Logf("serve's bounds: %v", bounds)
	for _, b := range bounds {
		// Two reports of one rewind overlap; each bound must hold.
		if n, _ := strconv.Atoi(b[1]); n < 1 || n > d.lost {
			t.Errorf("serve reported at least %d orders lost; %d were", n, d.lost)
		}
	}
	if !strings.Contains(d.reconcile, "redis lost accepted orders: noticed") {
		t.Errorf("reconcile did not report the loss:\n%s", d.reconcile)
	}
}

// TestServeRefusesDurabilityRedisCannotKeep: serve --durability aof on a
// Redis without appendfsync always does not start, and says which setting.
func TestServeRefusesDurabilityRedisCannotKeep(t *testing.T) {
	srv := testenv.StartRedis(t, testenv.WithConfig("appendonly", "yes"))
	t.Setenv("FLASHSALE_JWT_SECRET", faultSecret)
	t.Setenv("FLASHSALE_ADMIN_TOKEN", faultAdmin)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"serve", "--strategy", "async", "--addr", "127.0.0.1:0", "--durability", "aof",
		"--redis", srv.URL(), "--db", testenv.MySQLURL(t)}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "appendfsync always, Redis has appendfsync everysec") {
		t.Fatalf("serve --durability aof on appendfsync everysec: %v; want a refusal naming appendfsync", err)
	}
}
