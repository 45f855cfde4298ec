package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
)

// AuditVoucher computes the voucher's Audit in SQL, in one transaction so
// the figures are from one snapshot. It returns ENotFound when the voucher
// does not exist.
func (db *DB) AuditVoucher(ctx context.Context, id int64) (flashsale.Audit, error) {
	var a flashsale.Audit
	err := db.Tx(ctx, func(tx *Tx) error {
		var limit int
		err := tx.r.QueryRowContext(ctx, "SELECT stock, remaining, limit_per_buyer FROM vouchers WHERE id = ?", id).Scan(&a.Stock, &a.Remaining, &limit)
		if errors.Is(err, sql.ErrNoRows) {
			return voucherNotFound(id)
		}
		if err != nil {
			return err
		}
		if err := tx.auditStatuses(ctx, id, &a); err != nil {
			return err
		}
		return tx.r.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(CASE WHEN u > ? THEN 1 ELSE 0 END), 0)
			FROM (SELECT SUM(quantity) AS u FROM orders WHERE voucher_id = ? AND `+liveOrders+` GROUP BY user_id) d`, limit, id).
			Scan(&a.DistinctBuyers, &a.DuplicateBuyers)
	})
	if err != nil {
		return flashsale.Audit{}, wrap(fmt.Sprintf("audit voucher %d", id), err)
	}
	return a, nil
}

// auditStatuses adds to a the voucher's orders and units by status.
func (tx *Tx) auditStatuses(ctx context.Context, id int64, a *flashsale.Audit) error {
	rows, err := tx.r.QueryContext(ctx, `SELECT status, COUNT(*), SUM(quantity), SUM(return_pending),
		SUM(CASE WHEN payment_id IS NULL THEN 0 ELSE 1 END) FROM orders WHERE voucher_id = ? GROUP BY status`, id)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var status flashsale.OrderStatus
		var n, units, pending, payments int
		if err := rows.Scan(&status, &n, &units, &pending, &payments); err != nil {
			return err
		}
		switch {
		case status.Live():
			a.Orders, a.Units = a.Orders+n, a.Units+units
		case status == flashsale.StatusCancelled || status == flashsale.StatusExpired:
			a.ReturnedUnits += units
			a.ReturnsPending += pending
			a.PaidAfterClose += payments
		}
		switch status {
		case flashsale.StatusPaid:
			a.Paid = n
		case flashsale.StatusAwaitingPayment:
			a.AwaitingPayment = n
		case flashsale.StatusCancelled:
			a.Cancelled = n
		case flashsale.StatusExpired:
			a.Expired = n
		}
	}
	return rows.Err()
}

// OrderIDs returns the ids of the voucher's live orders, in
// ascending order.
func (db *DB) OrderIDs(ctx context.Context, voucherID int64) ([]int64, error) {
	return db.int64s(ctx, fmt.Sprintf("order ids of voucher %d", voucherID),
		"SELECT id FROM orders WHERE voucher_id = ? AND "+liveOrders+" ORDER BY id", voucherID)
}

// OrderUsers returns the ids of the users with a live order of the voucher, in ascending order.
func (db *DB) OrderUsers(ctx context.Context, voucherID int64) ([]int64, error) {
	return db.int64s(ctx, fmt.Sprintf("order users of voucher %d", voucherID),
		"SELECT DISTINCT user_id FROM orders WHERE voucher_id = ? AND "+liveOrders+" ORDER BY user_id", voucherID)
}

// int64s runs a query of one integer column and returns its values.
func (db *DB) int64s(ctx context.Context, op, query string, args ...any) ([]int64, error) {
	return int64s(ctx, db.r, op, query, args...)
}
