package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/flashsale/flashsale"
)

// HasOrder reports whether the user has an order for the voucher, whatever
// its status.
func (q Queries) HasOrder(ctx context.Context, voucherID, userID int64) (bool, error) {
	var one int
	err := q.r.QueryRowContext(ctx, "SELECT 1 FROM orders WHERE voucher_id = ? AND user_id = ?", voucherID, userID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, wrap(fmt.Sprintf("has order of user %d for voucher %d", userID, voucherID), err)
	}
	return true, nil
}

// orderStatuses are the statuses the orders table holds (its CHECK).
var orderStatuses = []flashsale.OrderStatus{flashsale.StatusPending, flashsale.StatusCreated, flashsale.StatusFailed}

// InsertOrder stores o, with status created when o.Status is empty, and sets
// o.CreatedAt and o.UpdatedAt to now. It returns EDuplicateOrder when the
// order's id or its voucher and user are taken: the unique key is the last
// line of defence for one order per user.
func (q Queries) InsertOrder(ctx context.Context, o *flashsale.Order) error {
	status := o.Status
	if status == "" {
		status = flashsale.StatusCreated
	}
	// Checked here, not only by the table's CHECK: MySQL's compares
	// without case and trailing spaces, and would store "Created".
	if !slices.Contains(orderStatuses, status) {
		return flashsale.Errorf(flashsale.EInvalid, "unknown order status %q", status)
	}
	t := now()
	_, err := q.w.ExecContext(ctx, `INSERT INTO orders (id, voucher_id, user_id, status, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)`, o.ID, o.VoucherID, o.UserID, string(status), dbTime(t), dbTime(t))
	if isDuplicate(err) {
		return fmt.Errorf("%w: %w", flashsale.Errorf(flashsale.EDuplicateOrder, "user %d already has an order for voucher %d", o.UserID, o.VoucherID), err)
	}
	if isCheckViolation(err) {
		return fmt.Errorf("%w: %w", flashsale.Errorf(flashsale.EInvalid, "unknown order status %q", status), err)
	}
	if err != nil {
		return wrap(fmt.Sprintf("insert order %d", o.ID), err)
	}
	o.Status, o.CreatedAt, o.UpdatedAt = status, t, t
	return nil
}

// orderColumns are the columns scanOrder reads, in order.
const orderColumns = "id, voucher_id, user_id, status, created_at, updated_at"

// scanOrder reads orderColumns.
func scanOrder(row interface{ Scan(...any) error }) (*flashsale.Order, error) {
	o := new(flashsale.Order)
	err := row.Scan(&o.ID, &o.VoucherID, &o.UserID, &o.Status, scanTime{&o.CreatedAt}, scanTime{&o.UpdatedAt})
	if err != nil {
		return nil, err
	}
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

// FindOrderByUser returns the user's order for the voucher, or ENotFound.
func (db *DB) FindOrderByUser(ctx context.Context, voucherID, userID int64) (*flashsale.Order, error) {
	o, err := scanOrder(db.r.QueryRowContext(ctx, "SELECT "+orderColumns+" FROM orders WHERE voucher_id = ? AND user_id = ?", voucherID, userID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, flashsale.Errorf(flashsale.ENotFound, "user %d has no order for voucher %d", userID, voucherID)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("find order of user %d for voucher %d", userID, voucherID), err)
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

// HeldOrders returns the voucher's orders that hold stock (status other
// than failed), by user id. Inside a Tx it reads the same snapshot as the
// Tx's other reads (InnoDB's REPEATABLE READ), so it pairs with Remaining;
// VoucherSnapshot does that.
func (q Queries) HeldOrders(ctx context.Context, voucherID int64) ([]flashsale.Order, error) {
	op := fmt.Sprintf("orders of voucher %d", voucherID)
	rows, err := q.r.QueryContext(ctx, "SELECT "+orderColumns+" FROM orders WHERE voucher_id = ? AND "+heldOrders+" ORDER BY user_id", voucherID)
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
