package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

// The cluster tests run `flashsale serve` processes on a private Redis
// Cluster (--redis in rueidis's cluster URL form, redis://m1?addr=m2&addr=m3)
// and break the cluster mid-sale. They kill and move nodes, so they do
// not run in parallel; those on three masters with replicas share the
// test binary's cluster (testenv.SharedCluster, replaced if a test left it
// unhealthy), the others start one of their own.

// clusterRig returns a sale rig on a cluster, under a key prefix of its
// own: the shared cluster without opts, else a fresh one.
func clusterRig(t *testing.T, opts ...testenv.ClusterOption) (*saleRig, *testenv.Cluster) {
	t.Helper()
	var c *testenv.Cluster
	if len(opts) == 0 {
		c = testenv.SharedCluster(t)
	} else {
		c = testenv.StartCluster(t, opts...)
	}
	r := newSaleRig(t, testenv.MySQLURL(t))
	r.redisURL = c.URL()
	r.redis, r.prefix = c.PrefixedClient(t)
	return r, c
}

// voucherSlot returns the hash slot of the rig's voucher's keys.
func (r *saleRig) voucherSlot() int {
	return testenv.Slot(fmt.Sprintf("%s{v%d}:meta", r.prefix, r.voucher))
}

// sellOut sends every buyer's clicks again, in a few passes, until the
// stock is sold (async: Redis's stock; the others: MySQL's), for the
// buyers refused while the cluster was failing over.
func (r *saleRig) sellOut(s *sale, targets func() []string, async bool) {
	r.t.Helper()
	db, err := store.Open(context.Background(), r.dbURL)
	if err != nil {
		r.t.Fatal(err)
	}
	defer db.Close()
	for pass := 0; pass < 5; pass++ {
		if async && r.redisStock(r.t) == 0 {
			return
		}
		if a, err := db.AuditVoucher(context.Background(), r.voucher); !async && err == nil && a.Remaining == 0 {
			return
		}
		r.buy(s, userRange(1, faultUsers), targets, faultStock+1, nil)
	}
}

// TestClusterMasterKilledMidSale sells through two instances of each of
// conditional, lock and async (durability memory, then replica) on a
// 3-master, 3-replica cluster, and SIGKILLs mid-sale the master that holds
// the hot key: the voucher's slot for async, the order ID generator's for
// the others (the lock strategy's per-buyer locks are on every master).
// The replica takes over (the killed master then rejoins as its replica);
// every mode goes on selling through the same processes and sells exactly
// the stock, each unit to another buyer, and with --durability replica no
// accepted order is lost.
func TestClusterMasterKilledMidSale(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		lose bool // accepted orders may be lost with the master
	}{
		{"conditional", []string{"--strategy", "conditional"}, false},
		{"lock", []string{"--strategy", "lock"}, false},
		{"async-memory", []string{"--strategy", "async", "--claim-idle", "2s"}, true},
		{"async-replica", []string{"--strategy", "async", "--claim-idle", "2s", "--durability", "replica", "--replica-timeout", "2s"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := clusterRig(t)
			a, b := r.serveWith(tc.args...), r.serveWith(tc.args...)
			r.createVoucher(a.URL)
			async := tc.args[1] == "async"
			hot := r.voucherSlot()
			if !async {
				hot = testenv.Slot(r.prefix + "idgen:{id}")
			}
			victim := c.MasterOf(hot)
			targets := func() []string { return []string{a.URL, b.URL} }
			s := &sale{accepted: map[int64]int64{}, named: map[int64]int64{}, codes: map[string]int{}}
			r.buy(s, userRange(1, faultStock/3+100), targets, faultStock/3, victim.Kill)
			if victim.Running() {
				t.Fatalf("the master of slot %d was not killed: %d accepted, %v", hot, len(s.accepted), s.codes)
			}
			promoted := c.WaitFailover(t, hot, 60*time.Second)
			before := len(s.accepted)
			t.Logf("killed %s (slot %d); %s took over; %d accepted before, refusals %v", victim.Addr(), hot, promoted.Addr(), before, s.codes)
			// The killed master comes back as the new master's replica:
			// without one, --durability replica answers every order 503.
			victim.Start()
			r.sellOut(s, targets, async)
			if len(s.accepted) == before {
				t.Errorf("no order accepted after the failover; refusals %v", s.codes)
			}
			var mayLose func(int64) bool
			if tc.lose {
				mayLose = func(int64) bool { return true }
			}
			r.checkAccepted(s, mayLose)
		})
	}
}

// checkAccepted drains the sale, checks MySQL sold exactly the stock, and
// that every accepted order is there as created, except those mayLose
// (nil: none) allows to be missing, which it counts as lost. It returns the
// store, open until the test ends.
func (r *saleRig) checkAccepted(s *sale, mayLose func(id int64) bool) (db *store.DB, lost int) {
	r.t.Helper()
	db = r.drainExact()
	for id, user := range s.accepted {
		o, err := db.FindOrder(context.Background(), id)
		switch {
		case err == nil && o.UserID == user && o.Status == flashsale.StatusCreated:
		case mayLose != nil && mayLose(id) && flashsale.ErrorCode(err) == flashsale.ENotFound:
			lost++
		default:
			r.t.Errorf("accepted order %d of user %d: %+v, %v; want it created", id, user, o, err)
		}
	}
	// An order lost with a master (mayLose) gave its unit back to Redis's
	// copy, which sold it again: only the orders kept count against the
	// stock (drainExact checked MySQL holds exactly the stock).
	if len(s.accepted)-lost > faultStock {
		r.t.Errorf("%d orders accepted and %d lost for stock %d", len(s.accepted), lost, faultStock)
	}
	r.t.Logf("accepted %d, lost %d; refusals %v, transport errors %d", len(s.accepted), lost, s.codes, s.failures)
	return db, lost
}

// TestClusterSlotMigratedMidSale moves the hot voucher's slot, keys and
// all, to another master mid-sale, the way redis-cli --cluster reshard
// does (IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE), while two
// async instances (with the per-user rate limiter) and their consumers
// sell through it: with durability memory on three masters, and with
// durability replica (whose WAIT runs on a connection pinned to the slot's
// master) on three masters with a replica each. The clients follow ASK and
// MOVED and retry TRYAGAIN (a script whose keys are split between the two
// nodes for a moment) on their own: no buyer gets an error, the audit is
// exact, and `flashsale reconcile` finds Redis and MySQL agree.
func TestClusterSlotMigratedMidSale(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []testenv.ClusterOption
		args []string
	}{
		{"memory", []testenv.ClusterOption{testenv.WithoutReplicas()}, nil},
		{"replica", nil, []string{"--durability", "replica", "--replica-timeout", "2s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := clusterRig(t, tc.opts...)
			args := append([]string{"--strategy", "async", "--claim-idle", "2s", "--rate-limit-user", "100"}, tc.args...)
			a, b := r.serveWith(args...), r.serveWith(args...)
			r.createVoucher(a.URL)
			r.migrateMidSale(c, []string{a.URL, b.URL})
			out, err := r.command("reconcile", "--voucher", strconv.FormatInt(r.voucher, 10)).CombinedOutput()
			if err != nil {
				t.Errorf("reconcile after the sale: %v\n%s", err, out)
			}
		})
	}
}

// migrateMidSale sells the rig's voucher through the servers at urls and
// moves its slot to another master once a quarter of the stock is sold,
// then checks nobody got an error and the sale is exact.
func (r *saleRig) migrateMidSale(c *testenv.Cluster, urls []string) {
	t := r.t
	t.Helper()
	slot := r.voucherSlot()
	from := c.MasterOf(slot)
	var to *testenv.RedisServer
	for _, m := range c.Masters() {
		if m != from {
			to = m
			break
		}
	}
	s := &sale{accepted: map[int64]int64{}, named: map[int64]int64{}, codes: map[string]int{}}
	migrate, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		r.buy(s, userRange(1, faultUsers), func() []string { return urls }, faultStock/4, func() { close(migrate) })
	}()
	select {
	case <-migrate:
	case <-done:
		t.Fatalf("the sale ended before %d orders were accepted: %v", faultStock/4, s.codes)
	}
	c.MigrateSlot(t, slot, to)
	s.mu.Lock()
	during := len(s.accepted)
	s.mu.Unlock()
	<-done
	if got := c.MasterOf(slot); got != to {
		t.Fatalf("slot %d is on %s after the migration; want %s", slot, got.Addr(), to.Addr())
	}
	t.Logf("slot %d moved from %s to %s with %d orders accepted", slot, from.Addr(), to.Addr(), during)
	if during >= faultStock {
		t.Errorf("the stock was sold before the migration ended (%d accepted): the test proves nothing", during)
	}
	for code, n := range s.codes {
		if code != flashsale.ESoldOut && code != flashsale.EDuplicateOrder {
			t.Errorf("%d buyers answered %s during the migration", n, code)
		}
	}
	if s.failures != 0 {
		t.Errorf("%d requests failed in transport", s.failures)
	}
	if len(s.accepted) != faultStock {
		t.Errorf("%d orders accepted; want %d", len(s.accepted), faultStock)
	}
	r.checkAccepted(s, nil)
	if n := r.redisStock(t); n != 0 {
		t.Errorf("Redis's stock after the sale: %d; want 0", n)
	}
}

// TestClusterMasterRestartedEmptyMidSale sells through two async
// instances on a 3-master cluster without replicas, and SIGKILLs mid-sale
// the master of the voucher's slot, one that does not hold <prefix>epoch,
// then starts it again on its port and nodes.conf with no data: no
// failover, the same master, empty. The instances notice it by that
// master's own epoch key: they log REDIS LOST ITS DATA naming the node,
// record it, and `flashsale reconcile` prints it with the node; the
// voucher reloads from MySQL and the sale ends exact there, with the
// orders lost within the bounds recorded.
func TestClusterMasterRestartedEmptyMidSale(t *testing.T) {
	r, c := clusterRig(t, testenv.WithoutReplicas())
	args := []string{"--strategy", "async", "--claim-idle", "2s"}
	a, b := r.serveWith(args...), r.serveWith(args...)
	epochOwner := c.MasterOf(testenv.Slot(r.prefix + "epoch"))
	for range 20 {
		if r.createVoucher(a.URL); c.MasterOf(r.voucherSlot()) != epochOwner {
			break
		}
	}
	victim := c.MasterOf(r.voucherSlot())
	if victim == epochOwner {
		t.Fatalf("20 vouchers, all on the master of %sepoch", r.prefix)
	}
	targets := func() []string { return []string{a.URL, b.URL} }
	s := &sale{accepted: map[int64]int64{}, named: map[int64]int64{}, codes: map[string]int{}}
	r.buy(s, userRange(1, faultStock/3+100), targets, faultStock/3, func() { victim.Kill(); victim.Start() })
	r.sellOut(s, targets, true)
	db := r.drainExact()
	lost := r.lostAccepted(db, s) // not persisted when the master lost its data
	t.Logf("killed and restarted empty %s; accepted %d, lost %d; refusals %v", victim.Addr(), len(s.accepted), lost, s.codes)
	if len(s.accepted)-lost != faultStock {
		t.Errorf("%d accepted, %d lost; want the stock, %d, persisted", len(s.accepted), lost, faultStock)
	}

	_, losses, err := async.ReadEpochs(context.Background(), r.redis, r.prefix)
	if err != nil {
		t.Fatal(err)
	}
	var bound int64
	for _, l := range losses {
		if l.Node != victim.Addr() {
			t.Errorf("loss recorded on node %q; want %s: %+v", l.Node, victim.Addr(), l)
		}
		bound += l.MayBeLost
	}
	if len(losses) == 0 || int64(lost) > bound {
		t.Errorf("%d accepted orders lost; losses recorded %+v (at most %d)", lost, losses, bound)
	}
	said := 0
	for _, p := range []string{a.Log, b.Log} {
		log, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), "REDIS LOST ITS DATA") && strings.Contains(string(log), "node="+victim.Addr()) {
			said++
		}
	}
	if said == 0 {
		t.Errorf("no instance logged REDIS LOST ITS DATA naming node %s", victim.Addr())
	}
	out, err := r.command("reconcile").CombinedOutput()
	t.Logf("reconcile: %v\n%s", err, out)
	if !strings.Contains(string(out), "redis lost its data on cluster node "+victim.Addr()) {
		t.Errorf("reconcile did not report the loss on %s", victim.Addr())
	}
}
