package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// awaiting sells one order of q units per user, each awaiting payment
// until payBy, through SellBatch, and returns them.
func awaiting(t testing.TB, db *DB, voucherID int64, q int, payBy time.Time, users ...int64) []flashsale.Order {
	t.Helper()
	orders := batch(voucherID, users...)
	for i := range orders {
		orders[i].Quantity, orders[i].PayBy = q, payBy
	}
	sales, stored := sellBatch(t, db, voucherID, orders)
	for i, s := range sales {
		if s != flashsale.OutcomeInserted || stored[i].Status != flashsale.StatusAwaitingPayment {
			t.Fatalf("order of user %d: %v, status %q; want inserted, awaiting payment", users[i], s, stored[i].Status)
		}
	}
	return stored
}

// wantStatus fails the test unless the order has the status.
func wantStatus(t testing.TB, db *DB, id int64, status flashsale.OrderStatus) {
	t.Helper()
	o, err := db.FindOrder(context.Background(), id)
	if err != nil || o.Status != status {
		t.Fatalf("order %d: %+v, %v; want status %q", id, o, err, status)
	}
}

// wantUnits fails the test unless the buyer's live units are n.
func wantUnits(t testing.TB, db *DB, voucherID, userID int64, n int) {
	t.Helper()
	units, _, err := db.BuyerUnits(context.Background(), voucherID, userID)
	if err != nil || units != n {
		t.Fatalf("units of user %d = %d, %v; want %d", userID, units, err, n)
	}
}

func TestPayOrder(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		now := time.Now().UTC()
		v := newVoucher(1, 10) // pay_value 9900
		v.LimitPerBuyer = 2
		if err := db.CreateVoucher(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		o := awaiting(t, db, 1, 2, now.Add(time.Minute), 1, 2, 3, 4)
		insertOrders(t, db, 1, flashsale.StatusCreated, 5)
		if _, _, err := db.CancelOrder(t.Context(), o[2].ID, 3, now); err != nil {
			t.Fatal(err)
		}
		pay := func(id string, order int64, amount int64, at time.Time) error {
			_, _, err := db.PayOrder(t.Context(), flashsale.Payment{ID: id, OrderID: order, Amount: amount}, at)
			return err
		}
		tests := []struct {
			name    string
			payment string
			order   int64
			amount  int64
			at      time.Time
			want    string
		}{
			{"pays", "p1", o[0].ID, 19800, now, ""},
			{"the same payment again", "p1", o[0].ID, 19800, now, ""},
			{"another payment of a paid order", "p2", o[0].ID, 19800, now, flashsale.EAlreadyPaid},
			{"a wrong amount", "p3", o[1].ID, 9900, now, flashsale.EInvalid},
			{"a payment id that paid another order", "p1", o[1].ID, 19800, now, flashsale.EInvalid},
			{"a cancelled order", "p4", o[2].ID, 19800, now, flashsale.EOrderClosed},
			{"past pay_by", "p5", o[3].ID, 19800, now.Add(time.Minute), flashsale.EOrderClosed},
			{"no payment step", "p6", 1005, 9900, now, flashsale.EOrderClosed},
			{"no such order", "p7", 999999, 9900, now, flashsale.ENotFound},
		}
		for _, tt := range tests {
			wantCode(t, pay(tt.payment, tt.order, tt.amount, tt.at), tt.want)
		}
		wantStatus(t, db, o[0].ID, flashsale.StatusPaid)
		wantStatus(t, db, o[1].ID, flashsale.StatusAwaitingPayment)
		wantStatus(t, db, o[3].ID, flashsale.StatusAwaitingPayment)
		wantRemaining(t, db, 1, 10-2*3) // 4 orders of 2, one cancelled; InsertOrder takes no stock
	})
}

func TestCancelOrder(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		now := time.Now().UTC()
		v := newVoucher(1, 10)
		v.LimitPerBuyer = 3
		if err := db.CreateVoucher(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		o := awaiting(t, db, 1, 3, now.Add(time.Minute), 1, 2)
		insertOrders(t, db, 1, flashsale.StatusCreated, 3)
		if _, _, err := db.PayOrder(t.Context(), flashsale.Payment{ID: "p", OrderID: o[1].ID, Amount: 3 * 9900}, now); err != nil {
			t.Fatal(err)
		}
		wantRemaining(t, db, 1, 4) // InsertOrder takes no stock
		got, changed, err := db.CancelOrder(t.Context(), o[0].ID, 1, now)
		if err != nil || got.Status != flashsale.StatusCancelled || !changed {
			t.Fatalf("CancelOrder = %+v, %v, %v; want cancelled now", got, changed, err)
		}
		wantRemaining(t, db, 1, 7)
		wantUnits(t, db, 1, 1, 0)
		got, changed, err = db.CancelOrder(t.Context(), o[0].ID, 1, now)
		if err != nil || got.Status != flashsale.StatusCancelled || changed {
			t.Fatalf("CancelOrder again = %+v, %v, %v; want cancelled before", got, changed, err)
		}
		wantRemaining(t, db, 1, 7) // returned once
		_, _, err = db.CancelOrder(t.Context(), o[0].ID, 2, now)
		wantCode(t, err, flashsale.ENotFound)
		_, _, err = db.CancelOrder(t.Context(), o[1].ID, 2, now)
		wantCode(t, err, flashsale.EAlreadyPaid)
		_, _, err = db.CancelOrder(t.Context(), 1003, 3, now)
		wantCode(t, err, flashsale.EOrderClosed)
		// The buyer may buy again, up to the limit.
		again := flashsale.Order{ID: 5001, VoucherID: 1, UserID: 1, Quantity: 3, PayBy: now.Add(time.Minute)}
		if sales, _ := sellBatch(t, db, 1, []flashsale.Order{again}); sales[0] != flashsale.OutcomeInserted {
			t.Fatalf("buying again after a cancel: %v, want inserted", sales[0])
		}
		wantUnits(t, db, 1, 1, 3)
		wantStatus(t, db, again.ID, flashsale.StatusAwaitingPayment)
	})
}

func TestExpireDue(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		now := time.Now().UTC()
		createVoucher(t, db, 1, 10)
		due := awaiting(t, db, 1, 1, now.Add(-time.Second), 1, 2, 3)
		later := awaiting(t, db, 1, 1, now.Add(time.Hour), 4)
		wantRemaining(t, db, 1, 6)
		expired, err := db.ExpireDue(t.Context(), now, 2)
		if err != nil || len(expired) != 2 {
			t.Fatalf("ExpireDue(max 2) = %d orders, %v; want 2", len(expired), err)
		}
		expired, err = db.ExpireDue(t.Context(), now, 10)
		if err != nil || len(expired) != 1 {
			t.Fatalf("ExpireDue again = %d orders, %v; want the third", len(expired), err)
		}
		for _, o := range due {
			wantStatus(t, db, o.ID, flashsale.StatusExpired)
			wantUnits(t, db, 1, o.UserID, 0)
		}
		wantStatus(t, db, later[0].ID, flashsale.StatusAwaitingPayment)
		wantRemaining(t, db, 1, 9)
		next, err := db.NextDue(t.Context())
		if err != nil || !next.Equal(later[0].PayBy.Truncate(time.Microsecond)) {
			t.Errorf("NextDue = %v, %v; want %v", next, err, later[0].PayBy)
		}
		// The returns are pending until marked done.
		pending, err := db.PendingReturns(t.Context(), time.Now().Add(time.Second), 10)
		if err != nil || len(pending) != 3 {
			t.Fatalf("PendingReturns = %d, %v; want 3", len(pending), err)
		}
		if err := db.MarkReturned(t.Context(), []int64{pending[0].ID, pending[1].ID, pending[2].ID}); err != nil {
			t.Fatal(err)
		}
		if pending, err = db.PendingReturns(t.Context(), time.Now().Add(time.Second), 10); err != nil || len(pending) != 0 {
			t.Fatalf("PendingReturns after MarkReturned = %d, %v; want 0", len(pending), err)
		}
	})
}

// TestExpireDueExactlyOnce has several instances (database handles) expire
// one backlog at once: every order is expired by exactly one of them, and
// the stock comes back exactly once.
func TestExpireDueExactlyOnce(t *testing.T) {
	const orders, instances = 600, 4
	url := dialects[0].url(t)
	db := openDB(t, url)
	createVoucher(t, db, 1, orders)
	now := time.Now().UTC()
	users := make([]int64, orders)
	for i := range users {
		users[i] = int64(i + 1)
	}
	awaiting(t, db, 1, 1, now.Add(-time.Second), users...)
	var expired atomic.Int64
	var wg sync.WaitGroup
	for range instances {
		other := openDB(t, url)
		wg.Go(func() {
			for {
				got, err := other.ExpireDue(context.Background(), now, 50)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					if more, _ := other.NextDue(context.Background()); more.IsZero() {
						return
					}
				}
				expired.Add(int64(len(got)))
			}
		})
	}
	wg.Wait()
	if expired.Load() != orders {
		t.Errorf("%d orders expired in all, want %d: each once", expired.Load(), orders)
	}
	wantRemaining(t, db, 1, orders)
}

// payRacing pays o at the time at, counting in paid a payment accepted; a
// refusal other than order_closed (the race lost) fails the test.
func payRacing(t *testing.T, db *DB, o flashsale.Order, at time.Time, paid *atomic.Int64) {
	_, _, err := db.PayOrder(context.Background(), flashsale.Payment{ID: fmt.Sprint("p", o.ID), OrderID: o.ID, Amount: 9900}, at)
	switch flashsale.ErrorCode(err) {
	case "":
		paid.Add(1)
	case flashsale.EOrderClosed:
	default:
		t.Errorf("PayOrder(%d): %v", o.ID, err)
	}
}

// TestPaymentRacesExpiry pays orders at the moment they fall due while
// another instance expires them: each ends paid or expired, never both,
// and only the expired ones gave their unit back.
func TestPaymentRacesExpiry(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		const n = 100
		createVoucher(t, db, 1, n)
		payBy := time.Now().UTC().Add(200 * time.Millisecond)
		users := make([]int64, n)
		for i := range users {
			users[i] = int64(i + 1)
		}
		orders := awaiting(t, db, 1, 1, payBy, users...)
		time.Sleep(time.Until(payBy))
		var paid atomic.Int64
		var wg sync.WaitGroup
		for i, o := range orders {
			wg.Go(func() {
				// Half pay just before pay_by by their clock, half after.
				payRacing(t, db, o, payBy.Add(time.Duration(i%2*2-1)*time.Microsecond), &paid)
			})
		}
		wg.Go(func() {
			for range 20 {
				if _, err := db.ExpireDue(context.Background(), payBy, 5); err != nil {
					t.Error(err)
				}
			}
		})
		wg.Wait()
		if _, err := db.ExpireDue(context.Background(), payBy, n); err != nil {
			t.Fatal(err)
		}
		statuses := map[flashsale.OrderStatus]int{}
		for _, o := range orders {
			got, err := db.FindOrder(t.Context(), o.ID)
			if err != nil {
				t.Fatal(err)
			}
			statuses[got.Status]++
		}
		if statuses[flashsale.StatusPaid] != int(paid.Load()) || statuses[flashsale.StatusExpired] != n-int(paid.Load()) || paid.Load() == 0 {
			t.Errorf("statuses %v after %d payments answered paid; want paid = answered, the rest expired", statuses, paid.Load())
		}
		wantRemaining(t, db, 1, statuses[flashsale.StatusExpired])
	})
}

// TestPaymentRacesCancel pays and cancels each order at once: each ends
// paid or cancelled, the loser's answer says which (already_paid for the
// cancel, order_closed for the payment), and only the cancelled ones gave
// their unit back.
func TestPaymentRacesCancel(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		const n = 60
		createVoucher(t, db, 1, n)
		users := make([]int64, n)
		for i := range users {
			users[i] = int64(i + 1)
		}
		now := time.Now().UTC()
		orders := awaiting(t, db, 1, 1, now.Add(time.Hour), users...)
		var wg sync.WaitGroup
		var paid, cancelled atomic.Int64
		for _, o := range orders {
			wg.Go(func() { payRacing(t, db, o, now, &paid) })
			wg.Go(func() {
				_, _, err := db.CancelOrder(context.Background(), o.ID, o.UserID, now)
				switch flashsale.ErrorCode(err) {
				case "":
					cancelled.Add(1)
				case flashsale.EAlreadyPaid:
				default:
					t.Errorf("CancelOrder(%d): %v", o.ID, err)
				}
			})
		}
		wg.Wait()
		if paid.Load()+cancelled.Load() != n {
			t.Fatalf("%d paid + %d cancelled of %d orders; want each exactly one", paid.Load(), cancelled.Load(), n)
		}
		wantRemaining(t, db, 1, int(cancelled.Load()))
	})
}
