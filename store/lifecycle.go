package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/flashsale/flashsale"
)

// An order's transitions after it is placed (docs/lifecycle.md). Each is
// one transaction that locks the order's row first and is conditional on
// the status it leaves, so it happens once however many instances try, and
// a refusal writes nothing. A transition that gives units back leaves the
// order return_pending until MarkReturned: the return's second half, if
// the seller has one (the async gate's stock in Redis), runs after the
// commit, and PendingReturns finds what a crash left undone.

// PayOrder marks the order paid by p at now. It returns the order, paid (by
// p now, or by p before: the same payment again gets the same answer, and
// changed is false), or
// ENotFound, EAlreadyPaid (paid by another payment), EOrderClosed
// (cancelled, expired, past its pay_by, failed, or created without a
// payment step), or EInvalid (an amount other than the voucher's pay_value
// times the quantity, or a payment id that paid another order).
func (db *DB) PayOrder(ctx context.Context, p flashsale.Payment, now time.Time) (o *flashsale.Order, changed bool, err error) {
	err = db.txRetrying(ctx, func(tx *Tx) error {
		o, changed, err = tx.payOrder(ctx, p, now)
		return err
	})
	return o, changed, err
}

func (tx *Tx) payOrder(ctx context.Context, p flashsale.Payment, now time.Time) (*flashsale.Order, bool, error) {
	o, err := tx.lockOrder(ctx, p.OrderID)
	if err != nil {
		return nil, false, err
	}
	if o.Status == flashsale.StatusPaid && o.PaymentID == p.ID {
		return o, false, nil
	}
	if err := payable(o, now); err != nil {
		return nil, false, err
	}
	price, err := tx.payValue(ctx, o.VoucherID)
	if err != nil {
		return nil, false, err
	}
	// Checked: a price stored before MaxPrice (or by hand) must not wrap
	// around to the amount of a forged payment (2^62 × 4 is 0).
	overflow, want := bits.Mul64(uint64(price), uint64(o.Units()))
	if price < 0 || overflow != 0 || want > math.MaxInt64 || p.Amount != int64(want) {
		return nil, false, flashsale.Errorf(flashsale.EInvalid, "amount %d does not match the order's price, %d × %d cents", p.Amount, price, o.Units())
	}
	t := now.UTC().Truncate(flashsale.TimePrecision)
	_, err = tx.w.ExecContext(ctx, "UPDATE orders SET status = 'paid', payment_id = ?, updated_at = ? WHERE id = ?", p.ID, dbTime(t), o.ID)
	if isDuplicate(err) {
		return nil, false, fmt.Errorf("%w: %w", flashsale.Errorf(flashsale.EInvalid, "payment %q paid another order", p.ID), err)
	}
	if err != nil {
		return nil, false, wrap(fmt.Sprintf("pay order %d", o.ID), err)
	}
	o.Status, o.PaymentID, o.UpdatedAt = flashsale.StatusPaid, p.ID, t
	tx.addOrderEvent(flashsale.EventOrderPaid, o)
	return o, true, nil
}

// payable returns nil when an order may be paid or cancelled at now, and
// the refusal otherwise.
func payable(o *flashsale.Order, now time.Time) error {
	switch o.Status {
	case flashsale.StatusPaid:
		return flashsale.Errorf(flashsale.EAlreadyPaid, "order %d is paid already", o.ID)
	case flashsale.StatusAwaitingPayment:
		if now.Before(o.PayBy) {
			return nil
		}
		return flashsale.Errorf(flashsale.EOrderClosed, "order %d expired at %s", o.ID, o.PayBy.Format(time.RFC3339))
	case flashsale.StatusCreated:
		return flashsale.Errorf(flashsale.EOrderClosed, "order %d is final: its voucher has no payment step", o.ID)
	}
	return flashsale.Errorf(flashsale.EOrderClosed, "order %d is %s", o.ID, o.Status)
}

// CancelOrder cancels the user's order at now and gives its units back. It
// returns the order, cancelled (now, or before: the same cancel again gets
// the same answer, and changed is false), or ENotFound (no such order, or another user's),
// EAlreadyPaid, or EOrderClosed (expired, past its pay_by, failed, or
// created without a payment step).
func (db *DB) CancelOrder(ctx context.Context, id, userID int64, now time.Time) (o *flashsale.Order, changed bool, err error) {
	err = db.txRetrying(ctx, func(tx *Tx) error {
		changed = false
		if o, err = tx.lockOrder(ctx, id); err != nil {
			return err
		}
		if o.UserID != userID {
			return orderNotFound(id)
		}
		if o.Status == flashsale.StatusCancelled {
			return nil
		}
		if err := payable(o, now); err != nil {
			return err
		}
		changed = true
		return tx.close(ctx, []*flashsale.Order{o}, flashsale.StatusCancelled, now)
	})
	if err != nil {
		return nil, false, err
	}
	return o, changed, nil
}

// ExpireDue expires up to max orders whose pay_by is at or before now,
// gives their units back, and returns them. Orders another transaction
// holds are left to it (SKIP LOCKED on MySQL), so several instances split
// a backlog; an order expired by another instance since it was found is
// passed over.
func (db *DB) ExpireDue(ctx context.Context, now time.Time, max int) ([]*flashsale.Order, error) {
	ids, err := db.int64s(ctx, "due orders", "SELECT id FROM orders WHERE status = 'awaiting_payment' AND pay_by <= ? ORDER BY pay_by LIMIT ?", dbTime(now), max)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	var expired []*flashsale.Order
	err = db.txRetrying(ctx, func(tx *Tx) error {
		orders, err := tx.lockOrders(ctx, "id IN "+placeholders(len(ids))+" AND status = 'awaiting_payment' AND pay_by <= ?", append(anys(ids), dbTime(now))...)
		if err != nil || len(orders) == 0 {
			return err
		}
		expired = orders
		return tx.close(ctx, orders, flashsale.StatusExpired, now)
	})
	if err != nil {
		return nil, err
	}
	return expired, nil
}

// NextDue returns the earliest pay_by of an order awaiting payment, or the
// zero time when there is none.
func (db *DB) NextDue(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := db.r.QueryRowContext(ctx, "SELECT MIN(pay_by) FROM orders WHERE status = 'awaiting_payment'").Scan(scanNullTime{&t})
	return t, wrap("next due order", err)
}

// close moves the orders, all of status awaiting_payment, to status
// (cancelled or expired), gives their units back to the vouchers'
// remaining stock and the buyers' units, and marks them return_pending.
func (tx *Tx) close(ctx context.Context, orders []*flashsale.Order, status flashsale.OrderStatus, now time.Time) error {
	t := now.UTC().Truncate(flashsale.TimePrecision)
	ids := make([]int64, len(orders))
	stock, live := map[int64]int{}, map[int64]int{}
	units := make([]unitChange, len(orders))
	for i, o := range orders {
		ids[i] = o.ID
		stock[o.VoucherID] += o.Units()
		live[o.VoucherID]++
		units[i] = unitChange{o.VoucherID, o.UserID, o.Units()}
	}
	_, err := tx.w.ExecContext(ctx, "UPDATE orders SET status = ?, return_pending = 1, updated_at = ? WHERE id IN "+placeholders(len(ids)),
		append([]any{string(status), dbTime(t)}, anys(ids)...)...)
	if err != nil {
		return wrap(fmt.Sprintf("close %d orders", len(ids)), err)
	}
	for _, v := range slices.Sorted(maps.Keys(stock)) {
		if err := tx.giveStock(ctx, v, stock[v]); err != nil {
			return err
		}
		if err := tx.countLive(ctx, v, -live[v]); err != nil {
			return err
		}
	}
	if err := tx.takeUnits(ctx, units); err != nil {
		return err
	}
	typ := flashsale.EventOrderCancelled
	if status == flashsale.StatusExpired {
		typ = flashsale.EventOrderExpired
	}
	for _, o := range orders {
		o.Status, o.UpdatedAt = status, t
		tx.addOrderEvent(typ, o)
	}
	return nil
}

// giveStock adds n units back to the voucher's remaining stock.
func (tx *Tx) giveStock(ctx context.Context, voucherID int64, n int) error {
	op := fmt.Sprintf("give back %d units of voucher %d", n, voucherID)
	res, err := tx.w.ExecContext(ctx, "UPDATE vouchers SET remaining = remaining + ?, updated_at = ? WHERE id = ?", n, dbTime(now()), voucherID)
	if err != nil {
		return wrap(op, checkError(err, n))
	}
	if ok, err := oneRow(res, op); err != nil || !ok {
		return cmp.Or(err, voucherNotFound(voucherID))
	}
	return nil
}

// PendingReturns returns up to max closed orders, closed before the given
// time, whose returns are not marked done.
func (db *DB) PendingReturns(ctx context.Context, before time.Time, max int) ([]*flashsale.Order, error) {
	return db.queryOrders(ctx, "pending returns", "SELECT "+orderColumns+" FROM orders WHERE return_pending = 1 AND updated_at < ? ORDER BY id LIMIT ?", dbTime(before), max)
}

// PendingReturnsOf is PendingReturns for one voucher, all of them.
func (db *DB) PendingReturnsOf(ctx context.Context, voucherID int64, before time.Time) ([]*flashsale.Order, error) {
	return db.queryOrders(ctx, fmt.Sprintf("pending returns of voucher %d", voucherID), "SELECT "+orderColumns+
		" FROM orders WHERE voucher_id = ? AND return_pending = 1 AND updated_at < ? ORDER BY id", voucherID, dbTime(before))
}

// MarkReturned records that the orders' returns are done.
func (db *DB) MarkReturned(ctx context.Context, ids []int64) error {
	for chunk := range slices.Chunk(ids, persistChunk) {
		_, err := db.w.ExecContext(ctx, "UPDATE orders SET return_pending = 0 WHERE id IN "+placeholders(len(chunk)), anys(chunk)...)
		if err != nil {
			return wrap(fmt.Sprintf("mark %d returns done", len(chunk)), err)
		}
	}
	return nil
}

// lockOrder reads the order and locks its row until the transaction ends,
// or returns ENotFound.
func (tx *Tx) lockOrder(ctx context.Context, id int64) (*flashsale.Order, error) {
	o, err := scanOrder(tx.w.QueryRowContext(ctx, "SELECT "+orderColumns+" FROM orders WHERE id = ?"+forUpdate(tx.dialect), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, orderNotFound(id)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("lock order %d", id), err)
	}
	return o, nil
}

// lockOrders reads the orders matching where, by id, and locks their rows
// until the transaction ends, passing over rows another transaction holds.
func (tx *Tx) lockOrders(ctx context.Context, where string, args ...any) ([]*flashsale.Order, error) {
	return queryOrders(ctx, tx.w, "lock orders", "SELECT "+orderColumns+" FROM orders WHERE "+where+" ORDER BY id"+skipLocked(tx.dialect), args...)
}

// payValue returns the voucher's price in cents: an unlocked read, as a
// voucher's price never changes.
func (tx *Tx) payValue(ctx context.Context, voucherID int64) (int64, error) {
	var price int64
	err := tx.r.QueryRowContext(ctx, "SELECT pay_value FROM vouchers WHERE id = ?", voucherID).Scan(&price)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, voucherNotFound(voucherID)
	}
	return price, wrap(fmt.Sprintf("price of voucher %d", voucherID), err)
}

// queryOrders runs a query of orderColumns on the database's readers.
func (db *DB) queryOrders(ctx context.Context, op, query string, args ...any) ([]*flashsale.Order, error) {
	return queryOrders(ctx, db.r, op, query, args...)
}

// queryOrders runs a query of orderColumns on q.
func queryOrders(ctx context.Context, q querier, op, query string, args ...any) ([]*flashsale.Order, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	var orders []*flashsale.Order
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			return nil, wrap(op, err)
		}
		orders = append(orders, o)
	}
	return orders, wrap(op, rows.Err())
}

// orderNotFound is the ENotFound error for an order id.
func orderNotFound(id int64) error {
	return flashsale.Errorf(flashsale.ENotFound, "order %d not found", id)
}

// anys returns ids as statement arguments.
func anys(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}

// int64s runs a query of one integer column on q and returns its values.
func int64s(ctx context.Context, q querier, op, query string, args ...any) ([]int64, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	ids := []int64{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, wrap(op, err)
		}
		ids = append(ids, id)
	}
	return ids, wrap(op, rows.Err())
}
