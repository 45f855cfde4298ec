package main

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async/reconcile"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

// TestShardedInstanceKilledMidSale sells a voucher of 2,000 units in 3
// shards (one per master of a 3-master cluster) to 5,000 buyers clicking
// twice, through two serve processes with their consumers, and SIGKILLs
// one of them a third of the way in: mid-request, perhaps mid-move between
// two shards. The buyers whose requests died try again through the other.
// The sale ends exact: 2,000 orders of 2,000 buyers, nothing left in
// Redis (shards and journals) or MySQL, and reconcile finds nothing.
func TestShardedInstanceKilledMidSale(t *testing.T) {
	const stock, users, shards = 2000, 5000, 3
	r, _ := clusterRig(t, testenv.WithoutReplicas())
	a, b := r.serve(true), r.serve(true)
	r.createShards(a.URL, stock, shards)
	live := newTargets(a.URL, b.URL)
	s := &sale{accepted: map[int64]int64{}, codes: map[string]int{}}
	r.buy(s, userRange(1, users), live.get, stock/3, func() {
		b.Kill()
		live.set(a.URL)
	})
	r.buy(s, userRange(1, users), live.get, stock+1, nil)
	r.checkStock(s, stock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.Open(ctx, r.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := reconcile.New(r.redis, db, reconcile.Config{Prefix: r.prefix}).Check(ctx, r.voucher)
	if err != nil || len(rep.Diffs) != 0 || rep.Stock != 0 || rep.Buyers != stock {
		t.Errorf("reconcile: %+v, %v; want no differences, no stock, %d buyers", rep, err, stock)
	}
}
