package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/flashsale/flashsale"
)

// SellBatch sells units of one voucher to a batch of buyers in one
// transaction, first come first served (orders[i] before orders[i+1]),
// and returns what it did with each: OutcomeInserted (stored with status
// created, CreatedAt and UpdatedAt now, a unit taken), OutcomeConflict (the
// buyer has an order already, or earlier in the batch) or OutcomeShort
// (sold out before the buyer's turn). Every order must be for voucherID and
// have a positive id. On an error nothing is stored: ENotFound for no such
// voucher, EBusy after losing races a few times (DESIGN.md), EUnavailable.
func (db *DB) SellBatch(ctx context.Context, voucherID int64, orders []flashsale.Order) ([]flashsale.Outcome, error) {
	for _, o := range orders {
		if o.ID <= 0 || o.VoucherID != voucherID {
			return nil, flashsale.Errorf(flashsale.EInvalid, "order %d for voucher %d is not a new order for voucher %d", o.ID, o.VoucherID, voucherID)
		}
	}
	if len(orders) == 0 {
		return nil, nil
	}
	var sales []flashsale.Outcome
	t := now()
	err := db.txRetrying(ctx, func(tx *Tx) error {
		var err error
		sales, err = tx.sellBatch(ctx, db.dialect, voucherID, orders, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range orders {
		if sales[i] == flashsale.OutcomeInserted {
			orders[i].Status, orders[i].Quantity = flashsale.StatusCreated, orders[i].Units()
			if !orders[i].PayBy.IsZero() {
				orders[i].Status = flashsale.StatusAwaitingPayment
			}
			orders[i].CreatedAt, orders[i].UpdatedAt = t, t
		}
	}
	return sales, nil
}

// sellBatch runs one attempt of SellBatch inside tx, stamping the orders
// it stores with t.
func (tx *Tx) sellBatch(ctx context.Context, dialect string, voucherID int64, orders []flashsale.Order, t time.Time) ([]flashsale.Outcome, error) {
	// The voucher's row is locked first, so the batches of one voucher,
	// from every process, run one after another: the remaining stock read
	// under the lock stays true until commit, and the buyers' units, read
	// after the lock is granted, count every batch committed before. A
	// writer that inserts orders without that lock (the async consumer) is
	// caught by the insert (a row it ignores fails the attempt with
	// errRaced) or by buyer_units' CHECK.
	left, err := tx.lockRemaining(ctx, dialect, voucherID)
	if err != nil {
		return nil, err
	}
	room, err := tx.buyerRoom(ctx, orders)
	if err != nil {
		return nil, err
	}
	sales := make([]flashsale.Outcome, len(orders))
	var sold []flashsale.Order
	for i, o := range orders {
		switch {
		case !room.fits(o):
			sales[i] = flashsale.OutcomeConflict
		case o.Units() > left:
			sales[i] = flashsale.OutcomeShort
		default:
			sales[i] = flashsale.OutcomeInserted
			room.take(o)
			left -= o.Units()
			o.CreatedAt, o.UpdatedAt = t, t
			sold = append(sold, o)
		}
	}
	if len(sold) == 0 {
		return sales, nil
	}
	// The same lock order as PersistOrders: order rows by id.
	slices.SortFunc(sold, func(a, b flashsale.Order) int { return cmp.Compare(a.ID, b.ID) })
	if err := tx.insertNewOrders(ctx, dialect, sold); err != nil {
		return nil, err
	}
	err = tx.takeStockAndUnits(ctx, sold)
	if errors.Is(err, errOverLimit) {
		return nil, fmt.Errorf("%w: %w", errRaced, err)
	}
	return sales, err
}

// lockRemaining reads the voucher's remaining stock and locks its row until
// the transaction ends. It returns ENotFound when there is no such voucher.
func (tx *Tx) lockRemaining(ctx context.Context, dialect string, voucherID int64) (int, error) {
	var n int
	err := tx.w.QueryRowContext(ctx, "SELECT remaining FROM vouchers WHERE id = ?"+forUpdate(dialect), voucherID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, voucherNotFound(voucherID)
	}
	if err != nil {
		return 0, wrap(fmt.Sprintf("lock remaining of voucher %d", voucherID), err)
	}
	return n, nil
}
