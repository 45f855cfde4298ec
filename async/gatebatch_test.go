package async_test

import (
	"context"
	"slices"
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

// TestGateBatchDecidesInOrder sends gate.lua one batch that runs out of
// stock half-way and names one buyer twice: each order gets the answer it
// would get alone, in the batch's order.
func TestGateBatchDecidesInOrder(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(2)
	if err := e.Svc.Reload(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	keys := append(e.Keys.Voucher(v.ID).Gate(), e.Keys.Voucher(v.ID).Meta+":p") // a pointer bucket in the voucher's slot
	args := []string{itoa(v.ID), "60000", "5", "1", "101", "1", "", "5", "1", "102", "1", "", "5", "2", "103", "1", "", "5", "3", "104", "1", "", "5", "1", "105", "1", "", "5"}
	res, err := async.GateScript.Exec(ctx, e.Client, keys, args).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	got, err := async.ParseGateReplies(res, []int64{1, 1, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []async.GateDecision{
		{Code: async.GateAccepted, Value: "1"},    // stock left
		{Code: async.GateDuplicate, Value: "101"}, // the same buyer earlier in the batch
		{Code: async.GateAccepted, Value: "0"},
		{Code: async.GateSoldOut},
		{Code: async.GateSoldOut}, // sold out is answered before duplicate, as alone
	}
	if !slices.Equal(got, want) {
		t.Errorf("decisions %v, want %v", got, want)
	}
	if stock, _, buyers := e.Snapshot(v.ID); stock != 0 || buyers != 2 {
		t.Errorf("stock %d, buyers %d; want 0 and 2", stock, buyers)
	}
	// The accepted orders' pointers, in one bucket with its TTL.
	pointers, err := e.Do(e.Client.B().Hgetall().Key(keys[4]).Build()).AsStrMap()
	if err != nil || len(pointers) != 2 || !strings.HasPrefix(pointers["101"], itoa(v.ID)+":1:") || !strings.HasPrefix(pointers["103"], itoa(v.ID)+":2:") {
		t.Errorf("pointers %v, %v; want orders 101 and 103 pointing to users 1 and 2", pointers, err)
	}
	if ttl, err := e.Do(e.Client.B().Pttl().Key(keys[4]).Build()).AsInt64(); err != nil || ttl <= 0 || ttl > 60000 {
		t.Errorf("the bucket's PTTL %d, %v; want in (0, 60000]", ttl, err)
	}
}

// TestGateBatchesConcurrentBuyers has many goroutines buy one voucher at
// once, so their orders share gate calls, with every buyer clicking twice:
// exactly the stock is sold, one order per buyer, and every repeat click
// is told duplicate_order or sold_out.
func TestGateBatchesConcurrentBuyers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const stock, buyers = 150, 400
	v := e.Voucher(stock)
	cfg := e.Config()
	cfg.MaxGateWait = time.Minute // batching, not overload: under -race a gate call may take 50 ms
	svc, err := async.NewService(e.Client, e.DB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		accepted []*flashsale.Order
		codes    = map[string]int{}
		wg       sync.WaitGroup
	)
	for u := int64(1); u <= buyers; u++ {
		for range 2 {
			wg.Go(func() {
				o, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					accepted = append(accepted, o)
				}
				codes[asynctest.Code(err)]++
			})
		}
	}
	wg.Wait()
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, stock)
	if len(accepted) != stock {
		t.Fatalf("accepted %d orders of stock %d; answers %v", len(accepted), stock, codes)
	}
	if got := codes[flashsale.ESoldOut] + codes[flashsale.EDuplicateOrder]; got != 2*buyers-stock {
		t.Errorf("answers %v: want every other attempt sold_out or duplicate_order", codes)
	}
	e.CheckSold(v, accepted)
}

// TestGateDropsAbandonedOrders stalls Redis (SIGSTOP) while 2,000 buyers
// order, each giving up after 300 ms: every one is told unavailable (those
// of the batch already sent once its call times out, gateTimeout: a taken
// order waits for its batch's answer), and once Redis resumes it has taken
// at most that one batch, not the orders of buyers who were told it failed.
func TestGateDropsAbandonedOrders(t *testing.T) {
	e, srv, svc, v := stallableSale(t, 10000)
	rc := srv.Client(t)
	ctx := context.Background()
	var err error
	srv.Pause()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		codes = map[string]int{}
	)
	for u := int64(2); u <= 2001; u++ {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			_, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
			mu.Lock()
			codes[asynctest.Code(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	time.Sleep(time.Second)
	srv.Resume()
	if codes[flashsale.EUnavailable] != 2000 {
		t.Fatalf("answers during the stall: %v; want 2000 unavailable", codes)
	}
	vk := svc.Keys().Voucher(v.ID)
	var buyers, stock int64
	e.WaitFor("the queue to drain", 15*time.Second, func() (bool, error) {
		return !svc.Queued(vk.Meta), nil
	})
	buyers, err = rc.Do(ctx, rc.B().Hlen().Key(vk.Buyers).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	stock, err = rc.Do(ctx, rc.B().Hget().Key(vk.Meta).Field("stock").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if buyers > 1+async.GateMaxBatch {
		t.Errorf("%d buyers in Redis after the stall; want at most 1 + one batch (%d)", buyers, 1+async.GateMaxBatch)
	}
	if stock+buyers != int64(v.Stock) {
		t.Errorf("stock %d + buyers %d != %d", stock, buyers, v.Stock)
	}
	t.Logf("buyers in Redis after the stall: %d (1 before it)", buyers)
}

// TestGateRepliesOfAnotherShapeAreErrors feeds the gate's reply reader
// replies gate.lua never sends: each is an error for the whole batch,
// never a decision read from the wrong place.
func TestGateRepliesOfAnotherShapeAreErrors(t *testing.T) {
	e := newEnv(t)
	for _, lua := range []string{
		"return {}",                                    // nothing
		"return {0, 5, 0, 5, 0, 0, 0, 0, '1-1'}",       // a head without the order's reply
		"return {0, 5, 0, 5, 0, 0, 0, 0, '1-1', 0, 0}", // two replies for one order
		"return {0, 5, 0, 5, 0, 'x', 0, 0, '1-1', 0}",  // a head that is not numbers
		"return {0, 5, 0, 5, 0, 0, 0, 0, {1}, 0}",      // a head without its entry
		"return {0, 5, 0, 5, 0, 0, 0, 0, '1-1', {9}}",  // an unknown refusal
		"return {0, 5, 0, 5, 0, 0, 0, 0, '1-1', 'e'}",  // an entry where a code goes
		"return {0, 5, 0, 5, 0, 0, 0, 0, '', {7, 1}}",  // a keyed refusal without its entry
		"return {'x'}",     // no code
		"return {2}",       // not started, without its wait
		"return {2, 1, 2}", // not started, with more than its wait
		"return {2, 'x'}",  // a wait that is not a number
	} {
		res, err := e.Do(e.Client.B().Eval().Script(lua).Numkeys(0).Build()).ToArray()
		if err != nil {
			t.Fatalf("%s: %v", lua, err)
		}
		if got, err := async.ParseGateReplies(res, []int64{1}); err == nil {
			t.Errorf("%s: read as %v, want an error", lua, got)
		}
	}
	// And the shapes it sends: a refusal of the whole batch, and each
	// order's own.
	res, err := e.Do(e.Client.B().Eval().Script("return {2, 1500}").Numkeys(0).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := async.ParseGateReplies(res, []int64{1, 2}); err != nil || len(got) != 2 || got[1].Code != async.GateNotStarted {
		t.Errorf("not started: %v, %v", got, err)
	}
	res, err = e.Do(e.Client.B().Eval().Script("return {0, 5, 0, 5, 0, 0, 0, 0, '1-1', 0, {5, '77'}, 4, 0}").Numkeys(0).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	want := []async.GateDecision{{Code: async.GateAccepted, Value: "3"}, {Code: async.GateDuplicate, Value: "77"}, {Code: async.GateSoldOut}, {Code: async.GateAccepted, Value: "2"}}
	if got, err := async.ParseGateReplies(res, []int64{2, 1, 9, 1}); err != nil || !slices.Equal(got, want) {
		t.Errorf("decisions %v, %v; want %v", got, err, want)
	}
}

// TestGateAnswersTakenOrderAfterItsCtx stalls Redis (SIGSTOP) under one
// order whose caller gives up after 300 ms while its gate call is on its
// way: the caller waits past its ctx for the gate's answer and is told
// what Redis decided once it resumes (accepted, pending), not unavailable
// for an order Redis took (internal/groupcommit's rule).
func TestGateAnswersTakenOrderAfterItsCtx(t *testing.T) {
	e, srv, svc, v := stallableSale(t, 10)
	rc := srv.Client(t)
	ctx := context.Background()
	vk := svc.Keys().Voucher(v.ID)
	srv.Pause()
	type answer struct {
		o   *flashsale.Order
		err error
	}
	done := make(chan answer, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		o, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2})
		done <- answer{o, err}
	}()
	e.WaitFor("the order's gate call", 5*time.Second, func() (bool, error) { return svc.Queued(vk.Meta), nil })
	select {
	case a := <-done:
		srv.Resume()
		t.Fatalf("answered %+v, %v while Redis stalled; want the gate's answer once it resumes", a.o, a.err)
	case <-time.After(time.Second): // well past the caller's ctx
	}
	srv.Resume()
	a := <-done
	if a.err != nil || a.o == nil || a.o.Status != flashsale.StatusPending {
		t.Fatalf("taken order whose caller's ctx ended: %+v, %v; want accepted, pending", a.o, a.err)
	}
	if buyers, err := rc.Do(ctx, rc.B().Hlen().Key(vk.Buyers).Build()).AsInt64(); err != nil || buyers != 2 {
		t.Fatalf("%d buyers in Redis (%v); want 2", buyers, err)
	}
}

// stallableSale returns a gate on a private Redis, one a test may stall,
// selling a voucher of stock that buyer 1 has ordered from (so the
// voucher is loaded and the script cached).
func stallableSale(t *testing.T, stock int) (*env, *testenv.RedisServer, *async.Service, *flashsale.Voucher) {
	e := newEnv(t)
	srv := testenv.StartRedis(t)
	svc, err := async.NewService(srv.Client(t), e.DB, async.Config{Prefix: e.Prefix, OrderIDs: e.IDs, Logger: e.Log})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	v := &flashsale.Voucher{Title: "stallable", Stock: stock, BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := svc.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); err != nil {
		t.Fatal(err)
	}
	return e, srv, svc, v
}

// TestGateBatchIsOneEntry sends gate.lua one batch of orders of every
// shape (two units with a payment window, an idempotency key with a space
// in it, the same key again, a plain one): the accepted orders go to the
// stream as one entry that layout.ParseEntry reads back whole, the order
// whose key an earlier one of the batch took is told that order and its
// entry, every pointer names the entry, and a consumer persists the
// orders as they were asked, the backlog counting orders until it has.
func TestGateBatchIsOneEntry(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(10, 10*time.Minute, 3, 1)
	vk := e.Keys.Voucher(v.ID)
	keys := append(vk.Gate(), vk.Meta+":p") // a pointer bucket in the voucher's slot
	args := []string{itoa(v.ID), "60000", "5",
		"1", "201", "2", "", "5",
		"2", "202", "1", "k 1", "5",
		"2", "203", "1", "k 1", "5",
		"3", "204", "1", "", "5"}
	res, err := async.GateScript.Exec(ctx, e.Client, keys, args).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	got, err := async.ParseGateReplies(res, []int64{2, 1, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := e.Do(e.Client.B().Xrange().Key(vk.Orders).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(entries) != 1 {
		t.Fatalf("stream %v, %v; want one entry", entries, err)
	}
	entry := entries[0].ID
	want := []async.GateDecision{{Code: async.GateAccepted, Value: "8"}, {Code: async.GateAccepted, Value: "7"},
		{Code: async.GateKeyPlaced, Value: "202:" + entry}, {Code: async.GateAccepted, Value: "6"}}
	if !slices.Equal(got, want) {
		t.Errorf("decisions %v, want %v", got, want)
	}
	orders, bad := layout.ParseEntry(v.ID, entry, entries[0].FieldValues)
	if len(bad) != 0 || len(orders) != 3 {
		t.Fatalf("the entry holds %+v, bad %v; want orders 201, 202, 204", orders, bad)
	}
	for i, w := range []struct {
		id, user int64
		q        int
		key      string
	}{{201, 1, 2, ""}, {202, 2, 1, "k 1"}, {204, 3, 1, ""}} {
		o := orders[i]
		if o.ID != w.id || o.UserID != w.user || o.Quantity != w.q || o.IdempotencyKey != w.key || o.PayBy.IsZero() {
			t.Errorf("order %d of the entry: %+v; want %+v with a pay_by", i, o, w)
		}
	}
	pointers, err := e.Do(e.Client.B().Hgetall().Key(keys[4]).Build()).AsStrMap()
	if err != nil || len(pointers) != 3 || pointers["202"] != itoa(v.ID)+":2:"+entry {
		t.Errorf("pointers %v, %v; want orders 201, 202, 204 at entry %s", pointers, err, entry)
	}
	if n, err := async.VoucherBacklog(ctx, e.Client, e.Prefix, "", v.ID); err != nil || n != 3 {
		t.Errorf("backlog %d, %v; want 3 orders", n, err)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 3)
	for _, w := range orders {
		o, err := e.DB.FindOrder(ctx, w.ID)
		if err != nil || o.UserID != w.UserID || o.Quantity != w.Quantity || o.IdempotencyKey != w.IdempotencyKey || o.Status != flashsale.StatusAwaitingPayment {
			t.Errorf("order %d in MySQL: %+v, %v; want %+v awaiting payment", w.ID, o, err, w)
		}
	}
	if n, err := async.VoucherBacklog(ctx, e.Client, e.Prefix, "", v.ID); err != nil || n != 0 {
		t.Errorf("backlog %d, %v once persisted; want 0", n, err)
	}
}
