package async_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
)

// rewindAlarm is what serve logs when a level rises (rewind.go).
const rewindAlarm = "REDIS LOST ACCEPTED ORDERS"

// loggedService returns another instance on the env's Redis and MySQL
// whose log is copied into logs.
func (e *env) loggedService(logs *testenv.Buffer) *async.Service {
	e.T.Helper()
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, e.T.Output()), &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := async.NewService(e.Client, e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: log})
	if err != nil {
		e.T.Fatal(err)
	}
	return svc
}

// homedUsers returns n user ids from from on, each of whose home is shard
// of k shards.
func homedUsers(from int64, n, shard, k int) []int64 {
	var us []int64
	for u := from; len(us) < n; u++ {
		if layout.HomeShard(u, k) == shard {
			us = append(us, u)
		}
	}
	return us
}

// sellThrough has the instances take turns placing one order for each
// user, all at once, and returns the orders accepted; refusals other than
// sold out and busy fail the test.
func sellThrough(t *testing.T, svcs []*async.Service, voucherID int64, us []int64) []*flashsale.Order {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var accepted []*flashsale.Order
	for i, u := range us {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			o, err := svcs[i%len(svcs)].PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: voucherID, UserID: u})
			switch asynctest.Code(err) {
			case "":
				mu.Lock()
				accepted = append(accepted, o)
				mu.Unlock()
			case flashsale.ESoldOut, flashsale.EBusy:
			default:
				t.Errorf("PlaceOrder(%d, %d): %v", voucherID, u, err)
			}
		})
	}
	wg.Wait()
	return accepted
}

// deadLetterOnShard buys for user (whose home is shard vk) with the
// consumers stopped and dead-letters the order as a consumer would.
func (e *env) deadLetterOnShard(voucherID, user int64, vk layout.VoucherKeys) {
	e.T.Helper()
	order := e.Buy(voucherID, user)[0]
	res, err := e.Do(e.Client.B().Xreadgroup().Group(async.DefaultGroup, "c").Count(1).Streams().Key(vk.Orders).Id(">").Build()).AsXRead()
	if err != nil || len(res[vk.Orders]) != 1 || res[vk.Orders][0].FieldValues[itoa(order.ID)] != itoa(user) {
		e.T.Fatalf("reading user %d's entry on shard %s: %v, %v", user, vk.Body, res, err)
	}
	e.DeadLetter(vk, res[vk.Orders][0], "crafted", string(layout.DeadMalformed))
}

// TestShardLevelsSurviveMovesReloadsAndRestores sells a sharded voucher
// through two instances with everything that moves a shard's stock
// without losing an order: moves (skewed buyers), moves cut after their
// first step and completed by reconcile --fix or by the next mover, a
// unit given back (restore.lua), a shard lost and reloaded from MySQL by
// one instance while the other had seen its levels. None is a rewind.
func TestShardLevelsSurviveMovesReloadsAndRestores(t *testing.T) {
	const stock, k = 1000, 3
	e := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs testenv.Buffer
	a, b := e.loggedService(&logs), e.loggedService(&logs)
	e.Svc = a
	svcs := []*async.Service{a, b}
	v := e.shardedVoucher(stock, k)
	shards := e.Keys.Shards(v.ID, k)
	rec := e.Reconciler()

	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	sold := sellThrough(t, svcs, v.ID, homedUsers(1, 400, 0, k)) // shard 0 borrows from the others
	sold = append(sold, sellThrough(t, svcs, v.ID, asynctest.Users(20000, 20060))...)
	e.WaitDrained(v.ID, len(sold))
	stop()

	for _, u := range homedUsers(25000, 3, 2, k) {
		e.deadLetterOnShard(v.ID, u, shards[2])
	}
	e.refillForCuts(ctx, shards)
	e.take(shards[1], shards[0], "cut.1") // completed by reconcile --fix
	rep, err := rec.Repair(ctx, v.ID)
	if err != nil || rep.Moved != 1 || len(rep.Diffs) != 3 {
		t.Fatalf("Repair = %+v, %v; want the cut move completed and the dead letters' units given back", rep, err)
	}
	for _, d := range rep.Diffs {
		if !d.Fixed {
			t.Fatalf("Repair did not give back %+v", d)
		}
	}
	e.take(shards[1], shards[0], "cut.2") // completed by the next mover
	// b sees shard 2's level with units given back (given 3), persisted.
	if _, err := b.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: homedUsers(25500, 1, 2, k)[0]}); err != nil {
		t.Fatal(err)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, len(sold)+1)
	// Shard 2 is lost and reloaded by a, with given 0 and as many buyers
	// as b saw: its level is above the one b saw in the old history.
	e.Do(e.Client.B().Del().Key(shards[2].Meta, shards[2].Buyers, shards[2].Orders).Build())
	e.Buy(v.ID, homedUsers(26000, 1, 2, k)[0])
	sellThrough(t, svcs, v.ID, homedUsers(27000, 200, 1, k))
	sellThrough(t, svcs, v.ID, asynctest.Users(30000, 30300))
	if _, losses := e.losses(); len(losses) != 0 {
		t.Errorf("losses recorded: %+v; want none", losses)
	}
	if strings.Contains(logs.String(), rewindAlarm) {
		t.Errorf("an instance reported a rewind:\n%s", logs.String())
	}
	checkLevelsSeen(t, svcs, v.ID, k)
}

// checkLevelsSeen checks every instance has seen a level of each of the
// voucher's k shards: the check ran.
func checkLevelsSeen(t *testing.T, svcs []*async.Service, voucherID int64, k int) {
	t.Helper()
	for i, svc := range svcs {
		kept, seen := svc.LevelsSeen(voucherID, k)
		if !kept {
			t.Fatalf("instance %d keeps no state of the voucher", i)
		}
		for s, ok := range seen {
			if !ok {
				t.Errorf("instance %d saw no level of shard %d: the check did not run", i, s)
			}
		}
	}
}

// TestShardRewindIsNoticedAndRepairedPerShard puts one shard's keys back
// to what they were several persisted orders earlier, as a failover to a
// replica that lagged does (TestShardedRewindOnFailover causes the real
// one). The next order on that shard reports it, for that shard, and the
// shard's buyers MySQL holds are recorded again; the other shards sell on
// with no report.
func TestShardRewindIsNoticedAndRepairedPerShard(t *testing.T) {
	const stock, k = 300, 3
	e := newEnv(t)
	ctx := context.Background()
	v := e.shardedVoucher(stock, k)
	vk := e.Keys.Shards(v.ID, k)[1]
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	first := sellThrough(t, []*async.Service{e.Svc}, v.ID, asynctest.Users(1, 30))
	e.WaitDrained(v.ID, len(first))
	old := map[string]string{}
	for _, key := range []string{vk.Meta, vk.Buyers, vk.Orders} {
		dump, err := e.Client.Do(ctx, e.Client.B().Dump().Key(key).Build()).ToString()
		if err != nil {
			t.Fatalf("DUMP %s: %v", key, err)
		}
		old[key] = dump
	}
	lostUsers := homedUsers(100, 12, 1, k)
	lost := sellThrough(t, []*async.Service{e.Svc}, v.ID, lostUsers)
	e.WaitDrained(v.ID, len(first)+len(lost))
	stop()
	for key, dump := range old { // shard 1's slot fails over to a replica that lagged
		e.Do(e.Client.B().Restore().Key(key).Ttl(0).SerializedValue(dump).Replace().Build())
	}
	sellThrough(t, []*async.Service{e.Svc}, v.ID, homedUsers(500, 5, 0, k)) // shard 0: no rewind
	if _, losses := e.losses(); len(losses) != 0 {
		t.Fatalf("losses recorded before shard 1 sold again: %+v", losses)
	}
	e.Buy(v.ID, homedUsers(600, 1, 1, k)...)
	var rewinds []async.EpochLoss
	e.WaitFor("the rewind recorded and shard 1's buyers recorded again", 10*time.Second, func() (bool, error) {
		_, rewinds = e.losses()
		for _, o := range lost {
			if err := e.Client.Do(ctx, e.Client.B().Hget().Key(vk.Buyers).Field(itoa(o.UserID)).Build()).Error(); err != nil {
				return false, nil
			}
		}
		return len(rewinds) > 0, nil
	})
	if len(rewinds) != 1 || rewinds[0].Kind != async.LossRewound || rewinds[0].Shard != vk.Body || rewinds[0].AtLeast != int64(len(lost)) {
		t.Errorf("rewinds recorded: %+v; want one on shard %s, at least %d", rewinds, vk.Body, len(lost))
	}
	for _, u := range lostUsers {
		if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u}); asynctest.Code(err) != flashsale.EDuplicateOrder {
			t.Errorf("a buyer whose persisted order Redis had lost buys again: %v; want %s", err, flashsale.EDuplicateOrder)
		}
	}
	if stock, initial, buyers := e.Snapshot(v.ID); stock+buyers != initial {
		t.Errorf("Redis: stock %d + buyers %d, initial %d", stock, buyers, initial)
	}
}

// refillForCuts gives shard 1 a few units back when the sale's refills
// drained it (shard 0 may have borrowed from it again and again, halving
// it each time): the two cut moves take from it. The units come from the
// fullest other shard by a whole move, so the stock stays the same.
func (e *env) refillForCuts(ctx context.Context, shards []layout.VoucherKeys) {
	e.T.Helper()
	stock := func(vk layout.VoucherKeys) int64 {
		n, err := e.Do(e.Client.B().Hget().Key(vk.Meta).Field("stock").Build()).AsInt64()
		if err != nil {
			e.T.Fatal(err)
		}
		return n
	}
	if stock(shards[1]) >= 4 {
		return
	}
	from := shards[0]
	if stock(shards[2]) > stock(from) {
		from = shards[2]
	}
	if err := layout.Move(ctx, e.Client, from, shards[1], "refill.cuts", 4); err != nil {
		e.T.Fatal(err)
	}
}
