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
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestGateAnswersBusyOverItsBound overloads the gate on purpose: Redis is
// silent (a frozen proxy) while 60 buyers order at once through a gate
// bound to 8 orders on their way. The 52 over the bound are answered busy,
// with a Retry-After, while Redis is still silent: they waited for nothing.
// Once Redis answers, the 8 are accepted, and every accepted order is
// persisted: nothing accepted is lost.
func TestGateAnswersBusyOverItsBound(t *testing.T) {
	const bound, buyers = 8, 60
	e := newEnv(t)
	v := e.Voucher(buyers)
	p := testenv.StartProxy(t)
	cfg := e.Config()
	cfg.MaxPending = bound
	svc, err := async.NewService(p.Client(t), e.DB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The voucher is kept by the instance before Redis goes silent.
	if _, err := svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	var (
		mu       sync.Mutex
		accepted []*flashsale.Order
		busy     int
		wg       sync.WaitGroup
	)
	answered := make(chan struct{}, buyers)
	for u := range int64(buyers) {
		wg.Go(func() {
			defer func() { answered <- struct{}{} }()
			o, err := svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: 100 + u})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, o)
			case asynctest.Code(err) == flashsale.EBusy && flashsale.RetryAfter(err) == time.Second:
				busy++
			default:
				t.Errorf("PlaceOrder(user %d) = %v; want accepted, or busy with a Retry-After of 1s", 100+u, err)
			}
		})
	}
	for i := range buyers - bound { // while Redis is silent
		select {
		case <-answered:
		case <-time.After(30 * time.Second): // a bound only on a hang
			p.Thaw()
			t.Fatalf("with Redis silent, %d of %d answered; want %d answered busy at once", i, buyers, buyers-bound)
		}
	}
	mu.Lock()
	if busy != buyers-bound || len(accepted) != 0 {
		t.Errorf("with Redis silent: %d busy, %d accepted; want %d busy", busy, len(accepted), buyers-bound)
	}
	mu.Unlock()
	p.Thaw()
	wg.Wait()
	if len(accepted) != bound {
		t.Fatalf("%d accepted once Redis answered; want the %d within the bound", len(accepted), bound)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 1+bound)
	for _, o := range accepted {
		if found, err := e.DB.FindOrder(context.Background(), o.ID); err != nil || found.UserID != o.UserID {
			t.Errorf("accepted order %d of user %d: in MySQL %+v, %v", o.ID, o.UserID, found, err)
		}
	}
}

// TestSlowGateAnswersBusyPastItsWait overloads the gate of a slow Redis
// on purpose: after one gate call took 300 ms, 600 buyers order at once
// while Redis is silent again. Orders that would wait behind a full batch
// for longer than MaxGateWait are answered busy at once; one batch in
// flight and one full batch queued are kept, and once Redis answers they
// are all accepted and persisted: nothing accepted is lost.
func TestSlowGateAnswersBusyPastItsWait(t *testing.T) {
	const buyers = 600
	e := newEnv(t)
	v := e.Voucher(buyers + 1)
	p := testenv.StartProxy(t)
	cfg := e.Config()
	cfg.MaxGateWait = 20 * time.Millisecond
	svc, err := async.NewService(p.Client(t), e.DB, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); err != nil {
		t.Fatal(err) // the voucher is kept, ids are allocated
	}
	p.Freeze() // a gate call of 300 ms: the gate learns that Redis is slow
	slow := make(chan error, 1)
	go func() {
		_, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2})
		slow <- err
	}()
	time.Sleep(300 * time.Millisecond)
	p.Thaw()
	if err := <-slow; err != nil {
		t.Fatal(err)
	}
	p.Freeze()
	var (
		mu       sync.Mutex
		accepted []*flashsale.Order
		busy     int
		wg       sync.WaitGroup
	)
	for u := range int64(buyers) {
		wg.Go(func() {
			o, err := svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 100 + u})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted = append(accepted, o)
			case asynctest.Code(err) == flashsale.EBusy && flashsale.RetryAfter(err) > 0:
				busy++
			default:
				t.Errorf("PlaceOrder(user %d) = %v; want accepted, or busy with a Retry-After", 100+u, err)
			}
		})
	}
	// While Redis is silent, all but at most two batches are answered busy.
	kept := buyers - 2*async.GateMaxBatch
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := busy
		mu.Unlock()
		if n >= kept {
			break
		}
		if time.Now().After(deadline) {
			p.Thaw()
			t.Fatalf("with Redis silent, %d answered busy; want at least %d", n, kept)
		}
	}
	p.Thaw()
	wg.Wait()
	if len(accepted)+busy != buyers || len(accepted) == 0 {
		t.Fatalf("%d accepted, %d busy of %d", len(accepted), busy, buyers)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 2+len(accepted))
	for _, o := range accepted {
		if found, err := e.DB.FindOrder(ctx, o.ID); err != nil || found.UserID != o.UserID {
			t.Errorf("accepted order %d of user %d: in MySQL %+v, %v", o.ID, o.UserID, found, err)
		}
	}
}
