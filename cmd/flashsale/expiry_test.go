package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// The expiry tests run async serve processes, sell a voucher with a
// payment window of one second through HTTP, let every order go unpaid,
// and cause a fault while the orders expire. Whatever the fault, each unit
// must come back exactly once: MySQL has every order expired and its
// remaining back at the stock, Redis has its stock back at the stock (not
// more), and the units sell again, exactly.
const expiryStock = 200

// createWindow creates the rig's voucher with the stock and a payment
// window of window seconds through a server.
func (r *saleRig) createWindow(url string, stock, window int) {
	r.t.Helper()
	body := fmt.Sprintf(`{"title":"expiry sale","stock":%d,"pay_value":100,"payment_window_seconds":%d,"begin_time":%q,"end_time":%q}`,
		stock, window, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	var out struct{ ID string }
	if err := r.post(url+"/api/vouchers", faultAdmin, body, http.StatusCreated, &out); err != nil {
		r.t.Fatal(err)
	}
	id, err := strconv.ParseInt(out.ID, 10, 64)
	if err != nil {
		r.t.Fatal(err)
	}
	r.voucher = id
}

// sellAll has users first..first+n-1 each order once through url and
// fails the test unless every order is accepted.
func (r *saleRig) sellAll(url string, first int64, n int) {
	r.t.Helper()
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	r.buy(s, userRange(first, first+int64(n)-1), func() []string { return []string{url} }, n+1, nil)
	if len(s.accepted) < n {
		r.t.Fatalf("%d of %d orders accepted (refused %v, transport errors %d)", len(s.accepted), n, s.codes, s.failures)
	}
}

// openStore opens the rig's database until the test ends.
func (r *saleRig) openStore() *store.DB {
	r.t.Helper()
	db, err := store.Open(context.Background(), r.dbURL)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { db.Close() })
	return db
}

// waitAudit polls the voucher's audit until cond holds.
func (r *saleRig) waitAudit(db *store.DB, what string, timeout time.Duration, cond func(a flashsale.Audit) bool) flashsale.Audit {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		a, err := db.AuditVoucher(context.Background(), r.voucher)
		if err == nil && cond(a) {
			return a
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("waiting for %s: audit %+v, %v", what, a, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitRedisStock polls the voucher's stock in Redis until it is n.
func (r *saleRig) waitRedisStock(n int, timeout time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for got := r.redisStock(r.t); got != n; got = r.redisStock(r.t) {
		if time.Now().After(deadline) {
			r.t.Fatalf("Redis stock %d, want %d", got, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// resell checks that the returned units sell again, exactly: stock more
// buyers are served, the next is told sold out, and Redis and MySQL agree.
func (r *saleRig) resell(url string, db *store.DB, stock int) {
	r.t.Helper()
	// Every instance forgets the sell-out when a return's notice reaches
	// it, and without one a second after it learnt it (the gate's
	// VerdictTTL).
	time.Sleep(1200 * time.Millisecond)
	r.sellAll(url, 100_001, stock)
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	r.buy(s, []int64{200_001}, func() []string { return []string{url} }, 2, nil)
	if len(s.accepted) != 0 || s.codes[flashsale.ESoldOut] == 0 {
		r.t.Fatalf("a buyer past the returned units: accepted %d, refused %v; want sold_out", len(s.accepted), s.codes)
	}
	if err := lab.NewAuditor(db, r.redis, r.prefix).Drain(context.Background(), r.voucher, 60*time.Second); err != nil {
		r.t.Fatal(err)
	}
	a, err := db.AuditVoucher(context.Background(), r.voucher)
	st, serr := async.ReadState(context.Background(), r.redis, r.prefix, r.voucher)
	if err != nil || serr != nil || a.Units != stock || a.Remaining != 0 || a.DuplicateBuyers != 0 || st.Stock != 0 || st.Held != stock {
		r.t.Fatalf("after the resale: MySQL %+v (%v), Redis %+v (%v); want %d units sold again, none left", a, err, st, serr, stock)
	}
}

// TestExpiryKilledBetweenTheHalves: the instance that expires the orders
// is SIGKILLed after MySQL committed the expiry and before the units went
// back into Redis (a delay injected between the two halves holds it
// there). Another instance's sweep finishes the returns, once.
func TestExpiryKilledBetweenTheHalves(t *testing.T) {
	t.Parallel() // its own prefix and database; waits for expiry, with no deadline of a second
	r := newSaleRig(t, testenv.MySQLURL(t))
	slow, err := lab.StartProcess(context.Background(), r.faultyServe(returnDelayEnv+"=1h"), r.logPath("serve-slow"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(slow.Kill)
	r.createWindow(slow.URL, expiryStock, 1)
	r.sellAll(slow.URL, 1, expiryStock)
	db := r.openStore()
	r.waitAudit(db, "every order expired in MySQL", 60*time.Second, func(a flashsale.Audit) bool {
		return a.Expired == expiryStock && a.ReturnsPending == expiryStock
	})
	if got := r.redisStock(t); got != 0 {
		t.Fatalf("Redis stock %d before the second half; want 0", got)
	}
	slow.Kill()
	other := r.serve(true)
	r.waitRedisStock(expiryStock, 60*time.Second)
	r.waitAudit(db, "the returns marked done", 30*time.Second, func(a flashsale.Audit) bool { return a.ReturnsPending == 0 })
	r.resell(other.URL, db, expiryStock)
}

// faultyServe returns a serve command of the rig with a fault injected
// through the environment.
func (r *saleRig) faultyServe(env string) *exec.Cmd {
	cmd := r.command("serve", "--addr", "127.0.0.1:0", "--strategy", "async", "--claim-idle", "2s")
	cmd.Env = append(cmd.Env, env)
	return cmd
}

// TestExpiryOnSeveralInstances: three serve processes each run an
// expirer while the orders fall due; every order expires once, and Redis
// gets every unit back once.
func TestExpiryOnSeveralInstances(t *testing.T) {
	t.Parallel() // its own prefix and database; waits for expiry, with no deadline of a second
	r := newSaleRig(t, testenv.MySQLURL(t))
	servers := []*lab.Process{r.serve(true), r.serve(true), r.serve(true)}
	r.createWindow(servers[0].URL, expiryStock, 1)
	var wg sync.WaitGroup
	for i, srv := range servers {
		wg.Go(func() { r.sellAll(srv.URL, int64(1+i*1000), expiryStock/3) })
	}
	wg.Wait()
	sold := expiryStock / 3 * 3
	db := r.openStore()
	r.waitAudit(db, "every order expired and returned", 60*time.Second, func(a flashsale.Audit) bool {
		return a.Expired == sold && a.ReturnsPending == 0
	})
	r.waitRedisStock(expiryStock, 10*time.Second)
	r.resell(servers[1].URL, db, expiryStock)
}

// TestExpiryWaitsForMySQL: MySQL is stopped while orders fall due; the
// expirers fail and try again, and once MySQL is back every order expires,
// once.
func TestExpiryWaitsForMySQL(t *testing.T) {
	m := testenv.StartMariaDB(t)
	r := newSaleRig(t, m.URL())
	srv := r.serve(true)
	r.createWindow(srv.URL, expiryStock, 1)
	r.sellAll(srv.URL, 1, expiryStock)
	db := r.openStore()
	r.waitAudit(db, "every order in MySQL", 60*time.Second, func(a flashsale.Audit) bool { return a.AwaitingPayment == expiryStock })
	m.Stop()
	time.Sleep(2 * time.Second) // pay_by passes while MySQL is down
	if got := r.redisStock(t); got != 0 {
		t.Fatalf("Redis stock %d while MySQL is down; want 0: nothing expires without it", got)
	}
	m.Start()
	r.waitAudit(db, "every order expired and returned", 60*time.Second, func(a flashsale.Audit) bool {
		return a.Expired == expiryStock && a.ReturnsPending == 0
	})
	r.waitRedisStock(expiryStock, 10*time.Second)
	r.resell(srv.URL, db, expiryStock)
}
