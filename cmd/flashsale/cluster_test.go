package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

// The cluster tests run `flashsale serve` processes on a private Redis
// Cluster (--redis in rueidis's cluster URL form, redis://m1?addr=m2&addr=m3)
// and break the cluster mid-sale. Each starts a cluster of its own: they
// kill and move nodes.

// clusterRig returns a sale rig on a fresh cluster, under the prefix "fs:".
func clusterRig(t *testing.T, opts ...testenv.ClusterOption) (*saleRig, *testenv.Cluster) {
	t.Helper()
	c := testenv.StartCluster(t, opts...)
	r := newSaleRig(t, testenv.MySQLURL(t))
	r.redisURL, r.redis, r.prefix = c.URL(), c.Client(t), "fs:"
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
			r.checkAccepted(s, tc.lose)
		})
	}
}

// checkAccepted drains the sale, checks MySQL sold exactly the stock, and
// that every accepted order is there as created; if lose, orders missing
// from MySQL are counted (lost with a killed master) instead of failing.
func (r *saleRig) checkAccepted(s *sale, lose bool) {
	r.t.Helper()
	db := r.drainExact()
	lost := 0
	for id, user := range s.accepted {
		o, err := db.FindOrder(context.Background(), id)
		switch {
		case err == nil && o.UserID == user && o.Status == flashsale.StatusCreated:
		case lose && flashsale.ErrorCode(err) == flashsale.ENotFound:
			lost++
		default:
			r.t.Errorf("accepted order %d of user %d: %+v, %v; want it created", id, user, o, err)
		}
	}
	if len(s.accepted) > faultStock {
		r.t.Errorf("%d orders accepted for stock %d", len(s.accepted), faultStock)
	}
	r.t.Logf("accepted %d, lost %d; refusals %v, transport errors %d", len(s.accepted), lost, s.codes, s.failures)
}

// TestClusterSlotMigratedMidSale moves the hot voucher's slot, keys and
// all, to another master mid-sale, the way redis-cli --cluster reshard
// does (IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE), while two
// async instances and their consumers sell through it. The clients follow
// ASK and MOVED and retry TRYAGAIN (a script whose keys are split between
// the two nodes for a moment) on their own: no buyer gets an error, and the
// audit is exact.
func TestClusterSlotMigratedMidSale(t *testing.T) {
	r, c := clusterRig(t, testenv.WithoutReplicas())
	a := r.serveWith("--strategy", "async", "--claim-idle", "2s")
	b := r.serveWith("--strategy", "async", "--claim-idle", "2s")
	r.createVoucher(a.URL)
	slot := r.voucherSlot()
	from := c.MasterOf(slot)
	var to *testenv.RedisServer
	for _, m := range c.Masters() {
		if m != from {
			to = m
			break
		}
	}
	targets := func() []string { return []string{a.URL, b.URL} }
	s := &sale{accepted: map[int64]int64{}, named: map[int64]int64{}, codes: map[string]int{}}
	migrate := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.buy(s, userRange(1, faultUsers), targets, faultStock/4, func() { close(migrate) })
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
	r.checkAccepted(s, false)
	if n := r.redisStock(t); n != 0 {
		t.Errorf("Redis's stock after the sale: %d; want 0", n)
	}
}
