package async_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/lifecycle"
)

// pausedStore is the Env's store whose ReloadSnapshot runs a hook once,
// after it read the snapshot and before the reload writes it: what other
// processes do while a reload is on its way.
type pausedStore struct {
	asynctest.DB
	once sync.Once
	hook func()
}

func (p *pausedStore) ReloadSnapshot(ctx context.Context, id int64, stream []int64) (*flashsale.Voucher, []flashsale.Order, []flashsale.Order, error) {
	v, orders, keyed, err := p.DB.ReloadSnapshot(ctx, id, stream)
	p.once.Do(p.hook)
	return v, orders, keyed, err
}

// lose deletes a voucher's (or shard's) keys but its stream and dead
// letters: a node that lost them.
func (e *env) lose(vk layout.VoucherKeys) {
	e.Do(e.Client.B().Del().Key(vk.Meta, vk.Buyers, vk.Keyed, vk.Returned).Build())
}

// checkStock fails unless the gate's stock (summed over shards) is MySQL's
// remaining: every order persisted, none in flight.
func (e *env) checkStock(v *flashsale.Voucher) {
	e.T.Helper()
	st, err := async.ReadState(context.Background(), e.Client, e.Prefix, v.ID)
	if err != nil {
		e.T.Fatal(err)
	}
	a, err := e.DB.AuditVoucher(context.Background(), v.ID)
	if err != nil {
		e.T.Fatal(err)
	}
	if st.Stock != a.Remaining {
		e.T.Fatalf("gate stock %d, MySQL remaining %d (stock %d, live units %d); want them equal", st.Stock, a.Remaining, a.Stock, a.Units)
	}
}

// TestReturnDuringAReloadIsKept: an order cancelled while a reload holds
// a snapshot in which it is live gets its unit back on sale, and its
// buyer may buy again (issue 32).
//
// It failed before the fix: return.lua found no meta and answered -1,
// taken as done; the reload then wrote its snapshot, in which the order
// still held its unit: the gate's stock was one short for good, and the
// buyer was refused duplicate_order.
func TestReturnDuringAReloadIsKept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(5, 10*time.Minute, 1, 1)
	o := e.Buy(v.ID, 1)[0]
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 1)
	stop()
	life := lifecycle.New(e.DB, lifecycle.Config{Restocker: async.Returns(e.Client, e.Config()), Logger: e.Log})
	db := &pausedStore{DB: e.DB, hook: func() {
		if _, err := life.CancelOrder(ctx, o.ID, o.UserID); err != nil {
			t.Error(err)
		}
	}}
	svc, err := async.NewService(e.Client, db, e.Config())
	if err != nil {
		t.Fatal(err)
	}
	e.lose(e.Keys.Voucher(v.ID))
	if err := svc.Reload(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	e.checkStock(v)
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); err != nil {
		t.Fatalf("the buyer whose order was cancelled during the reload buys again: %v", err)
	}
}

// TestSlowReloadDoesNotUndoANewerOne: of two reloads at once, the one
// that read MySQL first and writes last leaves the buyers' records the
// other one loaded, and the orders since then wrote, as they are.
//
// It failed before the fix: every reload wrote its snapshot's buyers
// over the live hash before load.lua looked whether the voucher was
// loaded, so the slow one set a buyer back by an order.
func TestSlowReloadDoesNotUndoANewerOne(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(10, 10*time.Minute, 2, 1)
	e.Buy(v.ID, 1)
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 1)
	stop()
	e.lose(e.Keys.Voucher(v.ID))
	db := &pausedStore{DB: e.DB, hook: func() {
		// The other instance reloads, and the buyer orders again.
		if err := e.Svc.Reload(ctx, v.ID); err != nil {
			t.Error(err)
		}
		e.Buy(v.ID, 1)
	}}
	slow, err := async.NewService(e.Client, db, e.Config())
	if err != nil {
		t.Fatal(err)
	}
	if err := slow.Reload(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	rec, err := e.Do(e.Client.B().Hget().Key(e.Keys.Voucher(v.ID).Buyers).Field("1").Build()).ToString()
	if units, _ := layout.ParseBuyer(rec); err != nil || units != 2 {
		t.Fatalf("buyer 1's record %q, %v; want 2 units", rec, err)
	}
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); asynctest.Code(err) != flashsale.ELimitReached {
		t.Fatalf("a third unit for a buyer with a limit of 2: %v; want limit_reached", err)
	}
}

// TestReloadKeepsIdempotencyKeys: after a reload a request retried with
// its Idempotency-Key gets the order it placed, persisted or still in
// the stream, not a second one (issue 32).
//
// It failed before the fix: the reload rebuilt the keyed hash empty.
func TestReloadKeepsIdempotencyKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(10, 10*time.Minute, 3, 1)
	place := func(key string) *flashsale.Order {
		o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1, IdempotencyKey: key})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	persisted := place("a")
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 1)
	stop()
	streamed := place("b") // not persisted: in the stream only
	e.lose(e.Keys.Voucher(v.ID))
	for _, want := range []*flashsale.Order{persisted, streamed} {
		if got := place(want.IdempotencyKey); got.ID != want.ID {
			t.Errorf("retry with key %q after the reload: order %d; want %d", want.IdempotencyKey, got.ID, want.ID)
		}
	}
}

// TestPartialShardReloadCountsAPendingReturnOnce: a cancel committed in
// MySQL whose return to its home shard has not run yet, when another
// shard is reloaded, puts its unit on sale once (issue 32).
//
// It failed before the fix: the reloaded shard's share (MySQL's remaining
// less what the loaded shards hold) counted the unit, and the sweep put
// it back on the home shard too: the gate held one unit more than MySQL.
func TestPartialShardReloadCountsAPendingReturnOnce(t *testing.T) {
	const k = 2
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(10, 10*time.Minute, 1, k)
	u := int64(1)
	for layout.HomeShard(u, k) != 0 {
		u++
	}
	o := e.Buy(v.ID, u)[0]
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 1)
	stop()
	// The cancel commits; its return to shard 0 has not run.
	closed, _, err := e.DB.CancelOrder(ctx, o.ID, o.UserID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.lose(e.Keys.Shards(v.ID, k)[1])
	if err := e.Svc.Reload(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if err := async.Returns(e.Client, e.Config()).Restock(ctx, []*flashsale.Order{closed}); err != nil {
		t.Fatal(err)
	}
	e.checkStock(v)
}

// TestOrdersPersistedDuringAReloadAreNotSoldAgain: orders that the
// consumer persists and trims from the stream while a reload holds a
// snapshot taken before them keep their units: the gate's stock is
// MySQL's remaining (issue 32, found by the model test's reasoning).
//
// It failed before the fix: the snapshot did not count them, and load.lua
// no longer found them in the stream, so their units were on sale again.
func TestOrdersPersistedDuringAReloadAreNotSoldAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(5, 10*time.Minute, 1, 1)
	e.Buy(v.ID, 1, 2, 3)
	e.lose(e.Keys.Voucher(v.ID))
	db := &pausedStore{DB: e.DB, hook: func() {
		stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
		e.WaitDrained(v.ID, 3)
		stop()
	}}
	svc, err := async.NewService(e.Client, db, e.Config())
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Reload(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	e.checkStock(v)
}
