package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
)

// heldOrders selects the orders that hold stock.
const heldOrders = "status <> 'failed'"

// AuditVoucher computes the voucher's Audit in SQL, in one statement so the
// figures are from one snapshot. It returns ENotFound when the voucher does
// not exist.
func (db *DB) AuditVoucher(ctx context.Context, id int64) (flashsale.Audit, error) {
	var a flashsale.Audit
	err := db.r.QueryRowContext(ctx, `SELECT v.stock, v.remaining,
		(SELECT COUNT(*) FROM orders WHERE voucher_id = v.id AND `+heldOrders+`),
		(SELECT COUNT(DISTINCT user_id) FROM orders WHERE voucher_id = v.id AND `+heldOrders+`),
		(SELECT COUNT(*) FROM (SELECT user_id FROM orders WHERE voucher_id = ? AND `+heldOrders+`
			GROUP BY user_id HAVING COUNT(*) > 1) d)
		FROM vouchers v WHERE v.id = ?`, id, id).
		Scan(&a.Stock, &a.Remaining, &a.Orders, &a.DistinctBuyers, &a.DuplicateBuyers)
	if errors.Is(err, sql.ErrNoRows) {
		return flashsale.Audit{}, voucherNotFound(id)
	}
	if err != nil {
		return flashsale.Audit{}, wrap(fmt.Sprintf("audit voucher %d", id), err)
	}
	return a, nil
}

// OrderIDs returns the ids of the voucher's orders that hold stock, in
// ascending order.
func (db *DB) OrderIDs(ctx context.Context, voucherID int64) ([]int64, error) {
	return db.int64s(ctx, fmt.Sprintf("order ids of voucher %d", voucherID),
		"SELECT id FROM orders WHERE voucher_id = ? AND "+heldOrders+" ORDER BY id", voucherID)
}

// OrderUsers returns the ids of the users with an order that holds stock for
// the voucher, in ascending order.
func (db *DB) OrderUsers(ctx context.Context, voucherID int64) ([]int64, error) {
	return db.int64s(ctx, fmt.Sprintf("order users of voucher %d", voucherID),
		"SELECT user_id FROM orders WHERE voucher_id = ? AND "+heldOrders+" ORDER BY user_id", voucherID)
}

// int64s runs a query of one integer column and returns its values.
func (db *DB) int64s(ctx context.Context, op, query string, args ...any) ([]int64, error) {
	return int64s(ctx, db.r, op, query, args...)
}
