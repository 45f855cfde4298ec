package strategy_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

// TestBatchSellsExactlyTheStock: 1000 buyers click twice each, all at
// once, for 200 units: exactly 200 orders for 200 distinct buyers, every
// created answer stored, nothing left, every other click refused as
// sold_out or duplicate_order. On MariaDB and on SQLite.
func TestBatchSellsExactlyTheStock(t *testing.T) {
	const stock, buyers, clicks = 200, 1000, 2
	for _, d := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"mysql", func(t *testing.T) string { return testenv.MySQLURL(t) }},
		{"sqlite", func(t *testing.T) string { return "sqlite://" + filepath.Join(t.TempDir(), "f.db") }},
	} {
		t.Run(d.name, func(t *testing.T) {
			f := newFixtureOn(t, d.url(t))
			vid := f.voucher(t, stock)
			s := f.strategy(t, "batch", 0)
			attempts := make([]int64, 0, buyers*clicks)
			for u := range buyers {
				for range clicks {
					attempts = append(attempts, int64(u+1))
				}
			}
			rand.Shuffle(len(attempts), func(i, j int) { attempts[i], attempts[j] = attempts[j], attempts[i] })
			var (
				mu      sync.Mutex
				codes   = map[string]int{}
				created = map[int64]*flashsale.Order{} // user → order
				wg      sync.WaitGroup
			)
			for _, user := range attempts {
				wg.Go(func() {
					o, err := s.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: vid, UserID: user})
					mu.Lock()
					defer mu.Unlock()
					codes[flashsale.ErrorCode(err)]++
					if err == nil {
						if created[user] != nil {
							t.Errorf("user %d told created twice", user)
						}
						created[user] = o
					}
				})
			}
			wg.Wait()
			if codes[""] != stock || codes[""]+codes[flashsale.ESoldOut]+codes[flashsale.EDuplicateOrder] != len(attempts) {
				t.Fatalf("answers %v; want %d created and the rest sold_out or duplicate_order", codes, stock)
			}
			wantStored(t, f.db, vid, created)
			a, err := f.db.AuditVoucher(context.Background(), vid)
			if err != nil || a.Orders != stock || a.DistinctBuyers != stock || a.Remaining != 0 {
				t.Fatalf("audit %+v, %v; want %d orders from distinct buyers, none left", a, err, stock)
			}
		})
	}
}

// wantStored fails the test unless every order in created (by user) is
// stored as it was answered.
func wantStored(t *testing.T, db *store.DB, voucherID int64, created map[int64]*flashsale.Order) {
	t.Helper()
	for user, o := range created {
		got, err := db.FindOrderByUser(context.Background(), voucherID, user)
		if err != nil || got.ID != o.ID || got.Status != flashsale.StatusCreated || o.Status != flashsale.StatusCreated {
			t.Fatalf("user %d was told %+v; stored %+v, %v", user, o, got, err)
		}
	}
}

// TestBatchCallerLeaving holds the voucher's row lock so a batch waits in
// the database, and checks what callers who stop waiting are told: one
// whose order a batch had taken gets that batch's answer (created, and the
// order is stored) although its context ended; one whose order was still
// queued gets its context's error, and the order is never stored.
func TestBatchCallerLeaving(t *testing.T) {
	const stock = 10
	f := newFixture(t)
	vid := f.voucher(t, stock)
	s := f.strategy(t, "batch", 0)
	ctx := context.Background()

	locked, release := make(chan struct{}), make(chan struct{})
	holder := make(chan error, 1)
	go func() {
		errRollback := errors.New("rollback")
		err := f.db.Tx(ctx, func(tx *store.Tx) error {
			if _, err := tx.DecrementRemaining(ctx, vid, 1); err != nil {
				return err
			}
			close(locked)
			<-release
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			holder <- err
		}
		close(holder)
	}()
	<-locked

	place := func(user int64, wait time.Duration) chan error {
		c := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			_, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: vid, UserID: user})
			c <- err
		}()
		return c
	}
	taken := place(1, 300*time.Millisecond) // its batch waits for the row lock
	time.Sleep(100 * time.Millisecond)
	queued := place(2, 100*time.Millisecond) // behind that batch
	if err := <-queued; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued caller whose context ended: %v, want context.DeadlineExceeded", err)
	}
	time.Sleep(300 * time.Millisecond) // the taken caller's context ends too
	close(release)
	if err := <-holder; err != nil {
		t.Fatal(err)
	}
	if err := <-taken; err != nil {
		t.Fatalf("caller whose order a batch had taken: %v, want the batch's answer (created)", err)
	}
	if err := <-place(3, 5*time.Second); err != nil {
		t.Fatalf("a later order: %v", err)
	}
	for user, want := range map[int64]bool{1: true, 2: false, 3: true} {
		_, err := f.db.FindOrderByUser(ctx, vid, user)
		if got := err == nil; got != want || (err != nil && flashsale.ErrorCode(err) != flashsale.ENotFound) {
			t.Errorf("user %d: order stored %v (%v), want %v", user, got, err, want)
		}
	}
	if a, err := f.db.AuditVoucher(ctx, vid); err != nil || a.Orders != 2 || a.Remaining != stock-2 {
		t.Fatalf("audit %+v, %v; want 2 orders and %d left", a, err, stock-2)
	}
}

// TestBatchMySQLStopped stops the database while 32 buyers a time keep
// ordering: the batches in flight and those after are answered unavailable
// (with a Retry-After) and store nothing, every order answered created is
// stored, stock and orders agree, and sales go on once the server is back.
func TestBatchMySQLStopped(t *testing.T) {
	const stock = 1_000_000
	m := testenv.StartMariaDB(t)
	f := newFixtureOn(t, m.URL())
	vid := f.voucher(t, stock)
	s := f.strategy(t, "batch", 0)

	var (
		mu          sync.Mutex
		created     = map[int64]*flashsale.Order{}
		codes       = map[string]int{}
		unavailable int
		next        int64
		stop        = make(chan struct{})
		wg          sync.WaitGroup
	)
	for range 32 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				next++
				user := next
				mu.Unlock()
				o, err := s.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: vid, UserID: user})
				fe, _ := errors.AsType[*flashsale.Error](err)
				mu.Lock()
				codes[flashsale.ErrorCode(err)]++
				switch {
				case err == nil:
					created[user] = o
				case fe != nil && fe.Code == flashsale.EUnavailable && fe.RetryAfter > 0:
					unavailable++
				default:
					t.Errorf("user %d: %v; want created or unavailable with a Retry-After", user, err)
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	count := func(n *int) int { mu.Lock(); defer mu.Unlock(); return *n }
	soldSoFar := func() int { mu.Lock(); defer mu.Unlock(); return len(created) }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("waiting for %s: answers %v", what, codes)
			}
		}
	}
	waitFor("sales before the outage", func() bool { return soldSoFar() >= 500 })
	m.Stop()
	waitFor("unavailable answers", func() bool { return count(&unavailable) >= 100 })
	m.Start()
	sold := soldSoFar()
	waitFor("sales after the outage", func() bool { return soldSoFar() >= sold+500 })
	close(stop)
	wg.Wait()

	wantStored(t, f.db, vid, created)
	a, err := f.db.AuditVoucher(context.Background(), vid)
	if err != nil {
		t.Fatal(err)
	}
	// Orders answered unavailable may be stored only when the server
	// committed but the answer to COMMIT was lost; the stock still agrees.
	wantConsistent(t, f.db, vid, stock, a.Orders)
	if a.Orders < len(created) || a.Orders > len(created)+count(&unavailable) {
		t.Errorf("%d orders stored, %d answered created, %d unavailable", a.Orders, len(created), unavailable)
	}
	t.Logf("answers %v; %d orders stored", codes, a.Orders)
}
