package store

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale"
)

// The statements the async pipeline (package async) needs beyond the rest
// of the store: reloading a voucher's buyers into Redis from a consistent
// snapshot, and undoing a voucher whose Redis load failed.

// VoucherOrders returns the voucher's orders that hold stock (status other
// than failed), by user id. Inside a Tx it reads the same snapshot as the
// Tx's other reads (InnoDB's REPEATABLE READ), so it pairs with Remaining.
func (c Conn) VoucherOrders(ctx context.Context, voucherID int64) ([]flashsale.Order, error) {
	op := fmt.Sprintf("orders of voucher %d", voucherID)
	rows, err := c.r.QueryContext(ctx, "SELECT "+orderColumns+" FROM orders WHERE voucher_id = ? AND "+heldOrders+" ORDER BY user_id", voucherID)
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

// DeleteVoucher deletes a voucher that has no orders: the undo of a
// CreateVoucher whose voucher could not be made sellable. It returns
// ENotFound when there is no such voucher without orders.
func (db *DB) DeleteVoucher(ctx context.Context, id int64) error {
	res, err := db.w.ExecContext(ctx, "DELETE FROM vouchers WHERE id = ? AND NOT EXISTS (SELECT 1 FROM orders WHERE voucher_id = ?)", id, id)
	if err != nil {
		return wrap(fmt.Sprintf("delete voucher %d", id), err)
	}
	if ok, err := oneRow(res, fmt.Sprintf("delete voucher %d", id)); err != nil {
		return err
	} else if !ok {
		return flashsale.Errorf(flashsale.ENotFound, "voucher %d without orders not found", id)
	}
	return nil
}
