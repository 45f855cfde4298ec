package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
)

// BuyerUnits returns the units the user's live orders of the voucher hold
// and the id of the latest of them (0 when there is none).
func (q Queries) BuyerUnits(ctx context.Context, voucherID, userID int64) (units int, latest int64, err error) {
	err = q.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(quantity), 0), COALESCE(MAX(id), 0) FROM orders
		WHERE voucher_id = ? AND user_id = ? AND `+liveOrders, voucherID, userID).Scan(&units, &latest)
	if err != nil {
		return 0, 0, wrap(fmt.Sprintf("units of user %d for voucher %d", userID, voucherID), err)
	}
	return units, latest, nil
}

// BuyerUnitsAndStock is BuyerUnits that also reads the voucher's
// remaining stock, in the same statement: the conditional strategy's
// first read, which refuses a buyer when the stock is gone before its
// transaction writes anything (PlaceOrder inserts before it decrements).
// A voucher that does not exist reads as 0 left. The read takes no lock;
// the decrement still decides.
func (q Queries) BuyerUnitsAndStock(ctx context.Context, voucherID, userID int64) (units int, latest int64, remaining int, err error) {
	var left sql.NullInt64
	err = q.r.QueryRowContext(ctx, `SELECT COALESCE(SUM(quantity), 0), COALESCE(MAX(id), 0), (SELECT remaining FROM vouchers WHERE id = ?) FROM orders
		WHERE voucher_id = ? AND user_id = ? AND `+liveOrders, voucherID, voucherID, userID).Scan(&units, &latest, &left)
	if err != nil {
		return 0, 0, 0, wrap(fmt.Sprintf("units of user %d and stock of voucher %d", userID, voucherID), err)
	}
	return units, latest, int(left.Int64), nil
}

// InsertOrder stores o as a new order: status created when o.Status is
// empty (a live status, or failed), quantity o.Units(), and o.PayBy, which
// an order awaiting payment must have. It adds a live order's units to its
// buyer's (buyer_units) in the same transaction. It returns EDuplicateOrder
// when the order's id is taken, and when the buyer's live units would pass
// limit ELimitReached, or EDuplicateOrder for a limit of 1. It counts a
// live order among its voucher's (live_orders) and writes its
// order.placed (or order.failed), unless it is PlaceOrder's insert, whose
// decrement counts it and whose event a trigger writes. It sets
// o.CreatedAt and o.UpdatedAt to now. It does not touch the stock.
func (db *DB) InsertOrder(ctx context.Context, o *flashsale.Order, limit int) error {
	return db.Tx(ctx, func(tx *Tx) error { return tx.InsertOrder(ctx, o, limit) })
}

// InsertOrder is DB.InsertOrder inside tx.
func (tx *Tx) InsertOrder(ctx context.Context, o *flashsale.Order, limit int) error {
	status := cmp.Or(o.Status, flashsale.StatusCreated)
	// Checked here, not only by the table's CHECK: MySQL's compares
	// without case and trailing spaces, and would store "Created".
	if !status.Live() && status != flashsale.StatusFailed || status == flashsale.StatusAwaitingPayment && o.PayBy.IsZero() {
		return flashsale.Errorf(flashsale.EInvalid, "cannot insert an order with status %q", status)
	}
	counted := tx.liveCounted[o.ID]
	if status.Live() && !counted {
		if err := tx.countLive(ctx, o.VoucherID, 1); err != nil {
			return err
		}
	}
	if status.Live() {
		if err := tx.addUnits(ctx, []unitChange{{o.VoucherID, o.UserID, o.Units()}}, map[int64]int{o.VoucherID: limit}); err != nil {
			return err
		}
	}
	t := now()
	id, marked := "?", counted && tx.placedOnInsert()
	if marked {
		// Migration 00015's trigger writes its order.placed; an integer,
		// so that it compares exactly with ids near 2^62.
		id = "(@flashsale_placed := CAST(? AS SIGNED))"
	}
	_, err := tx.w.ExecContext(ctx, `INSERT INTO orders (id, voucher_id, user_id, quantity, status, pay_by, idempotency_key, created_at, updated_at)
		VALUES (`+id+`, ?, ?, ?, ?, ?, ?, ?, ?)`, o.ID, o.VoucherID, o.UserID, o.Units(), string(status),
		nullTime(o.PayBy), nullString(o.IdempotencyKey), dbTime(t), dbTime(t))
	if err != nil && marked {
		tx.unmarkPlaced()
	}
	if isDuplicate(err) {
		return tx.duplicate(ctx, o, err)
	}
	if err != nil {
		return wrap(fmt.Sprintf("insert order %d", o.ID), err)
	}
	o.Status, o.Quantity, o.CreatedAt, o.UpdatedAt = status, o.Units(), t, t
	switch {
	case status == flashsale.StatusFailed:
		tx.addOrderEvent(flashsale.EventOrderFailed, o)
	case !counted: // else a trigger writes it (PlaceOrder)
		tx.addOrderEvent(flashsale.EventOrderPlaced, o)
	}
	return nil
}

// ErrKeyTaken is in the chain of InsertOrder's error when another order
// holds the order's idempotency key (for its voucher and user): the
// caller answers with that order (FindOrderByKey).
var ErrKeyTaken = errors.New("store: another order holds the idempotency key")

// duplicate returns InsertOrder's error for a unique violation: the
// order's id taken, or (when no order has its id) its idempotency key.
func (tx *Tx) duplicate(ctx context.Context, o *flashsale.Order, err error) error {
	var n int
	if qerr := tx.r.QueryRowContext(ctx, "SELECT COUNT(*) FROM orders WHERE id = ?", o.ID).Scan(&n); qerr == nil && n == 0 && o.IdempotencyKey != "" {
		return fmt.Errorf("%w: %w: %w", flashsale.Errorf(flashsale.EDuplicateOrder, "an order was placed with this Idempotency-Key already"), ErrKeyTaken, err)
	}
	return fmt.Errorf("%w: %w", flashsale.Errorf(flashsale.EDuplicateOrder, "order %d exists already", o.ID), err)
}

// orderColumns are the columns scanOrder reads, in order.
const orderColumns = "id, voucher_id, user_id, quantity, status, pay_by, payment_id, idempotency_key, created_at, updated_at"

// liveOrders selects the orders that hold their units.
const liveOrders = "status IN ('pending', 'awaiting_payment', 'paid', 'created')"

// scanOrder reads orderColumns.
func scanOrder(row interface{ Scan(...any) error }) (*flashsale.Order, error) {
	o := new(flashsale.Order)
	var payment, key sql.NullString
	err := row.Scan(&o.ID, &o.VoucherID, &o.UserID, &o.Quantity, &o.Status, scanNullTime{&o.PayBy},
		&payment, &key, scanTime{&o.CreatedAt}, scanTime{&o.UpdatedAt})
	if err != nil {
		return nil, err
	}
	o.PaymentID, o.IdempotencyKey = payment.String, key.String
	return o, nil
}

// FindOrder returns the order with the given id, or ENotFound.
func (db *DB) FindOrder(ctx context.Context, id int64) (*flashsale.Order, error) {
	o, err := scanOrder(db.r.QueryRowContext(ctx, "SELECT "+orderColumns+" FROM orders WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, flashsale.Errorf(flashsale.ENotFound, "order %d not found", id)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("find order %d", id), err)
	}
	return o, nil
}

// FindOrderByUser returns the user's latest live order of the voucher, or
// ENotFound.
func (db *DB) FindOrderByUser(ctx context.Context, voucherID, userID int64) (*flashsale.Order, error) {
	o, err := scanOrder(db.r.QueryRowContext(ctx, "SELECT "+orderColumns+" FROM orders WHERE voucher_id = ? AND user_id = ? AND "+liveOrders+" ORDER BY id DESC LIMIT 1", voucherID, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, flashsale.Errorf(flashsale.ENotFound, "user %d has no order for voucher %d", userID, voucherID)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("find order of user %d for voucher %d", userID, voucherID), err)
	}
	return o, nil
}

// FindOrderByKey returns the user's order of the voucher placed with the
// idempotency key, or ENotFound.
func (db *DB) FindOrderByKey(ctx context.Context, voucherID, userID int64, key string) (*flashsale.Order, error) {
	o, err := scanOrder(db.r.QueryRowContext(ctx, "SELECT "+orderColumns+" FROM orders WHERE voucher_id = ? AND user_id = ? AND idempotency_key = ?", voucherID, userID, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, flashsale.Errorf(flashsale.ENotFound, "user %d has no order for voucher %d with key %q", userID, voucherID, key)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("find order of user %d for voucher %d by key", userID, voucherID), err)
	}
	return o, nil
}

// MaxOrderID returns the highest order id stored, or 0 when there is none:
// the ID generator's high-water mark after a restart.
func (db *DB) MaxOrderID(ctx context.Context) (int64, error) {
	var id int64
	if err := db.r.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM orders").Scan(&id); err != nil {
		return 0, wrap("max order id", err)
	}
	return id, nil
}

// HeldOrders returns the voucher's live orders (those that hold stock), by
// user id. Inside a Tx it reads the same snapshot as the Tx's other reads
// (InnoDB's REPEATABLE READ), so it pairs with Remaining.
func (q Queries) HeldOrders(ctx context.Context, voucherID int64) ([]flashsale.Order, error) {
	return q.ordersOf(ctx, voucherID, liveOrders)
}

// ordersOf returns the voucher's orders that match where (with its
// placeholders' args), by user id.
func (q Queries) ordersOf(ctx context.Context, voucherID int64, where string, args ...any) ([]flashsale.Order, error) {
	op := fmt.Sprintf("orders of voucher %d", voucherID)
	rows, err := q.r.QueryContext(ctx, "SELECT "+orderColumns+" FROM orders WHERE voucher_id = ? AND ("+where+") ORDER BY user_id, id", append([]any{voucherID}, args...)...)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	orders := []flashsale.Order{}
	for rows.Next() {
		o, err := scanOrder(rows)
		if err != nil {
			return nil, wrap(op, err)
		}
		orders = append(orders, *o)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(op, err)
	}
	return orders, nil
}
