package store

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// batch returns orders for the voucher, one per user, with order id
// voucherID*1000+user.
func batch(voucherID int64, users ...int64) []flashsale.Order {
	orders := make([]flashsale.Order, len(users))
	for i, u := range users {
		orders[i] = flashsale.Order{ID: voucherID*1000 + u, VoucherID: voucherID, UserID: u, Status: flashsale.StatusPending}
	}
	return orders
}

// persist runs PersistOrders, failing the test on error.
func persist(t testing.TB, db *DB, orders []flashsale.Order) flashsale.PersistResult {
	t.Helper()
	res, err := db.PersistOrders(context.Background(), orders)
	if err != nil {
		t.Fatalf("PersistOrders: %v", err)
	}
	return res
}

// wantResult fails the test unless res has the outcomes, and counts that
// agree with them.
func wantResult(t testing.TB, res flashsale.PersistResult, want ...flashsale.Outcome) {
	t.Helper()
	counts := map[flashsale.Outcome]int{}
	for _, o := range want {
		counts[o]++
	}
	if !slices.Equal(res.Outcomes, want) || res.Inserted != counts[flashsale.OutcomeInserted] ||
		res.AlreadyPresent != counts[flashsale.OutcomeAlreadyPresent] || res.Conflicts != counts[flashsale.OutcomeConflict] {
		t.Fatalf("PersistOrders = %+v, want outcomes %v", res, want)
	}
}

// wantOrders fails the test unless the voucher's orders are exactly ids.
func wantOrders(t testing.TB, db *DB, voucherID int64, ids ...int64) {
	t.Helper()
	got, err := db.OrderIDs(context.Background(), voucherID)
	if err != nil || !slices.Equal(got, ids) {
		t.Fatalf("OrderIDs(%d) = %v, %v; want %v", voucherID, got, err, ids)
	}
}

func TestPersistOrdersIdempotent(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		orders := batch(1, 1, 2, 3, 4, 5)
		wantResult(t, persist(t, db, orders), flashsale.OutcomeInserted, flashsale.OutcomeInserted, flashsale.OutcomeInserted, flashsale.OutcomeInserted, flashsale.OutcomeInserted)
		wantResult(t, persist(t, db, orders), flashsale.OutcomeAlreadyPresent, flashsale.OutcomeAlreadyPresent, flashsale.OutcomeAlreadyPresent, flashsale.OutcomeAlreadyPresent, flashsale.OutcomeAlreadyPresent)
		wantRemaining(t, db, 1, 5)
		wantOrders(t, db, 1, 1001, 1002, 1003, 1004, 1005)
		o, err := db.FindOrder(t.Context(), 1003)
		if err != nil || o.Status != flashsale.StatusCreated {
			t.Errorf("FindOrder = %+v, %v; want status created", o, err)
		}
	})
}

func TestPersistOrdersPartialOverlap(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		persist(t, db, batch(1, 1, 2))
		orders := []flashsale.Order{
			{ID: 1001, VoucherID: 1, UserID: 1}, // stored before
			{ID: 9002, VoucherID: 1, UserID: 2}, // user 2 holds 1002
			{ID: 1003, VoucherID: 1, UserID: 3}, // new
			{ID: 1003, VoucherID: 1, UserID: 3}, // repeated in the batch
			{ID: 9003, VoucherID: 1, UserID: 3}, // user 3 took 1003 just above
			{ID: 1004, VoucherID: 1, UserID: 4}, // new
		}
		wantResult(t, persist(t, db, orders), flashsale.OutcomeAlreadyPresent, flashsale.OutcomeConflict, flashsale.OutcomeInserted, flashsale.OutcomeAlreadyPresent, flashsale.OutcomeConflict, flashsale.OutcomeInserted)
		wantRemaining(t, db, 1, 6)
		wantOrders(t, db, 1, 1001, 1002, 1003, 1004)
	})
}

func TestPersistOrdersMultiVoucher(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		for _, id := range []int64{1, 2, 3} {
			createVoucher(t, db, id, 5)
		}
		var orders []flashsale.Order
		for u := int64(1); u <= 4; u++ { // interleaved: 1, 2, 3, 1, 2, 3, …
			orders = append(orders, batch(1, u)[0], batch(2, u)[0])
			orders = append(orders, batch(3, u)[:u%2]...) // users 1 and 3 only
		}
		res := persist(t, db, orders)
		if res.Inserted != 10 || len(res.Outcomes) != 10 {
			t.Fatalf("PersistOrders = %+v, want 10 inserted", res)
		}
		wantRemaining(t, db, 1, 1)
		wantRemaining(t, db, 2, 1)
		wantRemaining(t, db, 3, 3)
		wantOrders(t, db, 3, 3001, 3003)
	})
}

func TestPersistOrdersStockShort(t *testing.T) {
	tests := []struct {
		name   string
		orders []flashsale.Order
		short  StockShortError
	}{
		{"one voucher", batch(1, 1, 2, 3, 4), StockShortError{VoucherID: 1, Remaining: 3, Needed: 4}},
		{"second voucher short", append(batch(2, 1, 2), batch(1, 5, 6, 7, 8)...), StockShortError{VoucherID: 1, Remaining: 3, Needed: 4}},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 3)
		createVoucher(t, db, 2, 10)
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := db.PersistOrders(t.Context(), tt.orders)
				short, ok := errors.AsType[*StockShortError](err)
				if !errors.Is(err, flashsale.ErrStockShort) || !ok || *short != tt.short {
					t.Fatalf("PersistOrders = %v; want %+v", err, tt.short)
				}
				wantRemaining(t, db, 1, 3)
				wantRemaining(t, db, 2, 10)
				wantOrders(t, db, 1)
				wantOrders(t, db, 2)
			})
		}
		// The orders that fit still go in once the batch is split.
		wantResult(t, persist(t, db, batch(1, 1, 2, 3)), flashsale.OutcomeInserted, flashsale.OutcomeInserted, flashsale.OutcomeInserted)
		wantRemaining(t, db, 1, 0)
	})
}

// TestPersistOrdersUnknownVoucher: a batch whose voucher this database
// does not hold is refused whole, and not as a stock shortage (the
// consumer dead-letters those; this is a configuration error).
func TestPersistOrdersUnknownVoucher(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 2, 10)
		_, err := db.PersistOrders(t.Context(), append(batch(2, 1), batch(9, 1, 2)...))
		unknown, ok := errors.AsType[*UnknownVoucherError](err)
		if !errors.Is(err, flashsale.ErrUnknownVoucher) || errors.Is(err, flashsale.ErrStockShort) || !ok ||
			*unknown != (UnknownVoucherError{VoucherID: 9, Needed: 2}) {
			t.Fatalf("PersistOrders = %v; want voucher 9 unknown, 2 orders need it, and no stock shortage", err)
		}
		wantRemaining(t, db, 2, 10)
		wantOrders(t, db, 2)
	})
}

// TestPersistOrdersLargeBatch spans several statements of persistChunk rows.
func TestPersistOrdersLargeBatch(t *testing.T) {
	const n = 2*persistChunk + 17
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, n+5)
		users := make([]int64, n)
		for i := range users {
			users[i] = int64(i + 1)
		}
		orders := batch(1, users...)
		slices.Reverse(orders) // not sorted by id
		if res := persist(t, db, orders); res.Inserted != n {
			t.Fatalf("inserted %d, want %d", res.Inserted, n)
		}
		if res := persist(t, db, orders); res.AlreadyPresent != n {
			t.Fatalf("second run: already present %d, want %d", res.AlreadyPresent, n)
		}
		a, err := db.AuditVoucher(t.Context(), 1)
		if want := (flashsale.Audit{Stock: n + 5, Remaining: 5, Orders: n, Units: n, DistinctBuyers: n}); err != nil || a != want {
			t.Errorf("AuditVoucher = %+v, %v; want %+v", a, err, want)
		}
	})
}

func TestPersistOrdersTimes(t *testing.T) {
	accepted := time.Date(2025, 11, 11, 12, 0, 0, 987654321, time.UTC)
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		orders := batch(1, 1, 2)
		orders[0].CreatedAt = accepted
		before := time.Now().UTC().Add(-time.Second)
		persist(t, db, orders)
		first, err := db.FindOrder(t.Context(), 1001)
		if err != nil || first.CreatedAt != accepted.Truncate(time.Microsecond) || first.UpdatedAt.Before(before) {
			t.Errorf("order with CreatedAt = %+v, %v; want CreatedAt %v kept and UpdatedAt now", first, err, accepted)
		}
		second, err := db.FindOrder(t.Context(), 1002)
		if err != nil || second.CreatedAt.Before(before) || second.CreatedAt != second.UpdatedAt {
			t.Errorf("order without CreatedAt = %+v, %v; want both times now", second, err)
		}
	})
}

func TestPersistOrdersEmptyAndInvalid(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		res, err := db.PersistOrders(t.Context(), nil)
		if err != nil || res.Inserted != 0 || len(res.Outcomes) != 0 {
			t.Errorf("PersistOrders(nil) = %+v, %v; want an empty result", res, err)
		}
		_, err = db.PersistOrders(t.Context(), []flashsale.Order{{ID: 0, VoucherID: 1, UserID: 1}})
		wantCode(t, err, flashsale.EInvalid)
	})
}

// TestPersistOrdersConcurrentRedelivery persists the same batch from several
// consumers at once, as after a redelivery: each order is inserted and its
// stock taken exactly once.
func TestPersistOrdersConcurrentRedelivery(t *testing.T) {
	const consumers, n = 4, 200
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 1000)
		users := make([]int64, n)
		for i := range users {
			users[i] = int64(i + 1)
		}
		orders := batch(1, users...)
		results := make([]flashsale.PersistResult, consumers)
		errs := make([]error, consumers)
		var wg sync.WaitGroup
		for i := range consumers {
			wg.Go(func() { results[i], errs[i] = db.PersistOrders(context.Background(), orders) })
		}
		wg.Wait()
		inserted := 0
		for i := range consumers {
			if errs[i] != nil {
				t.Errorf("consumer %d: %v", i, errs[i])
			}
			inserted += results[i].Inserted
		}
		if inserted != n {
			t.Errorf("inserted %d in all, want %d", inserted, n)
		}
		wantRemaining(t, db, 1, 1000-n)
	})
}

// TestPersistOrdersRacesUncommittedWriter makes PersistOrders lose the race
// for certain on MySQL: another transaction has inserted the batch's orders
// but not committed when PersistOrders looks them up, so its insert waits
// and then skips them. It must retry and report them present, not take
// their stock a second time. (SQLite has one writer at a time, so this race
// cannot happen there.)
func TestPersistOrdersRacesUncommittedWriter(t *testing.T) {
	db := openDB(t, dialects[0].url(t))
	createVoucher(t, db, 1, 10)
	orders := batch(1, 1, 2, 3)
	inserted := make(chan struct{})
	release := make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- db.Tx(context.Background(), func(tx *Tx) error {
			for i := range orders {
				if err := tx.InsertOrder(context.Background(), &orders[i], 1); err != nil {
					return err
				}
			}
			if _, err := tx.DecrementRemaining(context.Background(), 1, len(orders)); err != nil {
				return err
			}
			close(inserted)
			<-release
			return nil
		})
	}()
	<-inserted
	type result struct {
		res flashsale.PersistResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := db.PersistOrders(context.Background(), batch(1, 1, 2, 3))
		done <- result{res, err}
	}()
	waitForInsert(t, db)
	close(release)
	if err := <-txDone; err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	wantResult(t, r.res, flashsale.OutcomeAlreadyPresent, flashsale.OutcomeAlreadyPresent, flashsale.OutcomeAlreadyPresent)
	wantRemaining(t, db, 1, 7)
}

// waitForInsert returns once PersistOrders has sent its insert on db's
// MySQL database: its lookup is done, so it cannot have seen the other
// transaction's uncommitted orders, and the insert waits for their locks.
func waitForInsert(t *testing.T, db *DB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := db.writer.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND INFO LIKE 'INSERT IGNORE INTO orders%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("PersistOrders did not send its insert")
}
