package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/store"
)

// restocks records the orders a Restocker was given, and fails while
// failing is set: the second half of a return whose server is down.
type restocks struct {
	mu      sync.Mutex
	count   map[int64]int
	failing atomic.Bool
}

func (r *restocks) Restock(_ context.Context, orders []*flashsale.Order) error {
	if r.failing.Load() {
		return errors.New("restock: the gate's server is down")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range orders {
		r.count[o.ID]++
	}
	return nil
}

var _ lifecycle.Restocker = (*restocks)(nil)

func openDB(t *testing.T, url string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sell creates a voucher and sells one order awaiting payment until payBy
// to each of n users, and returns the orders.
func sell(t *testing.T, db *store.DB, n int, payBy time.Time) []flashsale.Order {
	t.Helper()
	v := &flashsale.Voucher{ID: 1, Title: "t", Stock: n, BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour)}
	if err := db.CreateVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	orders := make([]flashsale.Order, n)
	for i := range orders {
		orders[i] = flashsale.Order{ID: int64(100 + i), VoucherID: 1, UserID: int64(i + 1), PayBy: payBy}
	}
	if _, err := db.SellBatch(context.Background(), 1, orders); err != nil {
		t.Fatal(err)
	}
	return orders
}

// TestSweepFinishesFailedReturns: a return whose second half fails stays
// pending, the cancel still stands, and the sweep finishes it once the
// server is back.
func TestSweepFinishesFailedReturns(t *testing.T) {
	db := openDB(t, testenv.MySQLURL(t))
	orders := sell(t, db, 2, time.Now().Add(time.Hour))
	r := &restocks{count: map[int64]int{}}
	r.failing.Store(true)
	s := lifecycle.New(db, lifecycle.Config{Restocker: r})
	if o, err := s.CancelOrder(t.Context(), orders[0].ID, orders[0].UserID); err != nil || o.Status != flashsale.StatusCancelled {
		t.Fatalf("CancelOrder = %+v, %v; want cancelled despite the failed restock", o, err)
	}
	cfg := lifecycle.ExpirerConfig{SweepAfter: time.Millisecond}
	time.Sleep(5 * time.Millisecond)
	if err := s.SweepReturns(t.Context(), cfg); err == nil {
		t.Fatal("SweepReturns with the server down: no error")
	}
	r.failing.Store(false)
	if err := s.SweepReturns(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if got := r.count[orders[0].ID]; got != 1 {
		t.Errorf("order restocked %d times, want once", got)
	}
	if pending, err := db.PendingReturns(t.Context(), time.Now().Add(time.Hour), 10); err != nil || len(pending) != 0 {
		t.Errorf("PendingReturns = %d, %v; want none", len(pending), err)
	}
	if st := s.Stats(); st.Cancelled != 1 || st.Swept != 1 || st.Returned != 1 {
		t.Errorf("Stats = %+v; want 1 cancelled, swept and returned", st)
	}
}

// TestExpirersOnSeveralInstances runs an expirer on each of several
// instances (their own database handles) while a backlog falls due: every
// order is expired and restocked exactly once.
func TestExpirersOnSeveralInstances(t *testing.T) {
	const n, instances = 400, 3
	url := testenv.MySQLURL(t)
	db := openDB(t, url)
	orders := sell(t, db, n, time.Now().Add(300*time.Millisecond))
	r := &restocks{count: map[int64]int{}}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	services := make([]*lifecycle.Service, instances)
	for i := range services {
		services[i] = lifecycle.New(openDB(t, url), lifecycle.Config{Restocker: r})
		wg.Go(func() { _ = services[i].Run(ctx, lifecycle.ExpirerConfig{Batch: 50}) })
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err := db.Voucher(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if v.Remaining == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	var expired int64
	for _, s := range services {
		expired += s.Stats().Expired
	}
	if expired != n {
		t.Errorf("%d expiries across the instances, want %d", expired, n)
	}
	for _, o := range orders {
		if r.count[o.ID] != 1 {
			t.Fatalf("order %d restocked %d times, want once", o.ID, r.count[o.ID])
		}
	}
}

// TestStatsCountReplaysOnce: the same cancel or payment again answers the
// same and does nothing, so Stats does not count it again (metrics'
// flashsale_returned_units_total reads Returned).
func TestStatsCountReplaysOnce(t *testing.T) {
	db := openDB(t, testenv.MySQLURL(t))
	orders := sell(t, db, 2, time.Now().Add(time.Hour))
	s := lifecycle.New(db, lifecycle.Config{})
	for range 2 {
		if _, err := s.CancelOrder(t.Context(), orders[0].ID, orders[0].UserID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PayOrder(t.Context(), flashsale.Payment{ID: "p", OrderID: orders[1].ID}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Cancelled != 1 || st.Returned != 1 || st.Paid != 1 {
		t.Errorf("Stats = %+v after one cancel and one payment, each sent twice; want 1 cancelled, 1 returned, 1 paid", st)
	}
}
