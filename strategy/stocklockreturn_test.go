package strategy_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/strategy"
)

// TestStocklockKeepsAReturnMadeWhileItHoldsTheStock: a unit that a cancel
// gives back while stocklock holds the voucher's stock, between its read
// of the remaining stock and its write, stays on sale: remaining + the
// live orders' units = stock.
//
// It fails (found by the load lab, lab24): stocklock writes the stock it
// read less the quantity, an absolute value (SetRemainingFenced), and the
// cancel's (or an expiry's) remaining + q takes no stock lock, so the
// write undoes it: the unit is neither sold nor on sale (stock drift +1).
func TestStocklockKeepsAReturnMadeWhileItHoldsTheStock(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	life := lifecycle.New(f.db, lifecycle.Config{})
	// Every hold sleeps a second between reading the stock and writing it.
	s, err := strategy.New("stocklock", strategy.Config{DB: f.db, IDs: f.ids, Locks: f.locks, LockWait: 30 * time.Second,
		LockLease: 30 * time.Second, Pause: time.Second, PauseEvery: 1, Lifecycle: life})
	if err != nil {
		t.Fatal(err)
	}
	v := f.windowVoucher(t, 2, time.Minute, 1)
	first, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2}) // reads 1, sleeps, writes 0
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the second order is in its pause: it read the stock
	if _, err := s.CancelOrder(ctx, first.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	a, err := f.db.AuditVoucher(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Remaining+a.Units != a.Stock {
		t.Fatalf("remaining %d + units %d of live orders != stock %d: the cancelled unit is lost", a.Remaining, a.Units, a.Stock)
	}
}

// hangUp is an ID generator whose buyer hangs up as the order's id is
// taken: it cancels the request's context, then hands out the id.
type hangUp struct {
	flashsale.IDGenerator
	cancel context.CancelFunc
}

func (h hangUp) NextID(ctx context.Context) (int64, error) {
	h.cancel()
	return h.IDGenerator.NextID(ctx)
}

// TestStocklockLosesNoUnitWhenTheBuyerHangsUp: a buyer who hangs up while
// stocklock places the order (here as the order's id is taken) leaves the
// stock as it was: remaining + the live orders' units = stock (issue 32).
//
// It failed before the fix: the fenced stock write committed on its own,
// then the insert failed on the cancelled context, and nothing gave the
// unit back.
func TestStocklockLosesNoUnitWhenTheBuyerHangsUp(t *testing.T) {
	f := newFixture(t)
	v := f.windowVoucher(t, 3, time.Minute, 1)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := strategy.New("stocklock", strategy.Config{DB: f.db, IDs: hangUp{f.ids, cancel}, Locks: f.locks, LockWait: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if o, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); err == nil {
		t.Logf("order %d placed although the buyer hung up", o.ID)
	}
	a, err := f.db.AuditVoucher(context.Background(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Remaining+a.Units != a.Stock {
		t.Fatalf("remaining %d + units %d of live orders != stock %d: the hung-up buyer's unit is lost", a.Remaining, a.Units, a.Stock)
	}
}

// TestKeyedRetryRacingTheFirstGetsItsOrder: a retry with the first
// request's Idempotency-Key that runs while the first still does (it
// outlived the idempotency lease) gets the first's order, not
// duplicate_order naming an order of its own that does not exist (issue
// 32).
//
// It failed before the fix: the retry's insert hit the key's unique
// index, which InsertOrder answered "order <the retry's id> exists
// already".
func TestKeyedRetryRacingTheFirstGetsItsOrder(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// Every hold sleeps between reading the stock and writing it, so
	// both requests pass the lookup by key before either inserts.
	s, err := strategy.New("stocklock", strategy.Config{DB: f.db, IDs: f.ids, Locks: f.locks, LockWait: 30 * time.Second,
		LockLease: 30 * time.Second, Pause: 500 * time.Millisecond, PauseEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	v := f.windowVoucher(t, 5, time.Minute, 3)
	req := flashsale.OrderRequest{VoucherID: v.ID, UserID: 1, IdempotencyKey: "k"}
	type answer struct {
		o   *flashsale.Order
		err error
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			o, err := s.PlaceOrder(ctx, req)
			answers <- answer{o, err}
		}()
	}
	a, b := <-answers, <-answers
	if a.err != nil || b.err != nil || a.o.ID != b.o.ID {
		t.Fatalf("two requests with one key: %+v, %+v; want one order, twice", a, b)
	}
	if au, err := f.db.AuditVoucher(ctx, v.ID); err != nil || au.Orders != 1 || au.Remaining != 4 {
		t.Fatalf("audit %+v, %v; want 1 order, 4 left", au, err)
	}
}
