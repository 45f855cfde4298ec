package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
)

// The statements on a voucher's remaining stock, one per kind of
// strategy: a plain read and absolute write (which loses updates under
// concurrency), a compare-and-set on the value read (which refuses buyers
// needlessly), and a conditional decrement (which works).

// Remaining returns the voucher's remaining stock with a plain read that
// takes no lock. It returns ENotFound when the voucher does not exist.
func (q Queries) Remaining(ctx context.Context, voucherID int64) (int, error) {
	var n int
	err := q.r.QueryRowContext(ctx, "SELECT remaining FROM vouchers WHERE id = ?", voucherID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, voucherNotFound(voucherID)
	}
	if err != nil {
		return 0, wrap(fmt.Sprintf("remaining of voucher %d", voucherID), err)
	}
	return n, nil
}

// SetRemaining writes n as the voucher's remaining stock, whatever it is
// now: the naive strategy's read-modify-write that loses updates. It returns
// ENotFound when the voucher does not exist and EInvalid when n is negative
// or above the voucher's stock (the table's CHECK constraints refuse it).
func (q Queries) SetRemaining(ctx context.Context, voucherID int64, n int) error {
	op := fmt.Sprintf("set remaining of voucher %d", voucherID)
	res, err := q.w.ExecContext(ctx, "UPDATE vouchers SET remaining = ?, updated_at = ? WHERE id = ?", n, dbTime(now()), voucherID)
	if err != nil {
		return wrap(op, checkError(err, n))
	}
	if matched, err := res.RowsAffected(); err != nil {
		return wrap(op, err)
	} else if matched == 0 {
		return voucherNotFound(voucherID)
	}
	return nil
}

// ClaimStockFence records fence as the voucher's stock fence if it is
// above every fence claimed or written before, and reports whether it
// did. A lock holder claims before it reads the stock: a holder whose
// lease ran out, and who read the stock before the next holder claimed,
// then has its write refused (SetRemainingFenced), whichever writes first.
// It reports false as well when the voucher does not exist.
func (q Queries) ClaimStockFence(ctx context.Context, voucherID, fence int64) (bool, error) {
	op := fmt.Sprintf("claim stock fence of voucher %d", voucherID)
	res, err := q.w.ExecContext(ctx, "UPDATE vouchers SET stock_fence = ? WHERE id = ? AND stock_fence < ?", fence, voucherID, fence)
	if err != nil {
		return false, wrap(op, err)
	}
	return oneRow(res, op)
}

// SetRemainingFenced writes n as the voucher's remaining stock, as
// SetRemaining does, only if no fence above fence was claimed or written
// before and the stock is still old, the value the caller read. It
// reports false when a later fence was claimed (or the voucher does not
// exist), and returns ErrStockMoved when the stock is no longer old: a
// cancel or expiry gave units back meanwhile, which take no stock lock.
func (q Queries) SetRemainingFenced(ctx context.Context, voucherID int64, old, n int, fence int64) (bool, error) {
	op := fmt.Sprintf("fenced set remaining of voucher %d", voucherID)
	res, err := q.w.ExecContext(ctx, "UPDATE vouchers SET remaining = ?, stock_fence = ?, updated_at = ? WHERE id = ? AND stock_fence <= ? AND remaining = ?",
		n, fence, dbTime(now()), voucherID, fence, old)
	if err != nil {
		return false, wrap(op, checkError(err, n))
	}
	if ok, err := oneRow(res, op); ok || err != nil {
		return ok, err
	}
	var claimed int64
	err = q.r.QueryRowContext(ctx, "SELECT stock_fence FROM vouchers WHERE id = ?", voucherID).Scan(&claimed)
	if errors.Is(err, sql.ErrNoRows) || err == nil && claimed > fence {
		return false, nil
	}
	if err != nil {
		return false, wrap(op, err)
	}
	return false, ErrStockMoved
}

// ErrStockMoved is returned by SetRemainingFenced when the remaining
// stock is no longer the value the caller read.
var ErrStockMoved = errors.New("store: the remaining stock moved since it was read")

// CompareAndSetRemaining writes newN as the remaining stock only if it is
// still old, and reports whether it did: optimistic locking on the stock
// value. It reports false as well when the voucher does not exist, and
// returns EInvalid when newN breaks the CHECK constraints.
func (q Queries) CompareAndSetRemaining(ctx context.Context, voucherID int64, old, newN int) (bool, error) {
	res, err := q.w.ExecContext(ctx, "UPDATE vouchers SET remaining = ?, updated_at = ? WHERE id = ? AND remaining = ?", newN, dbTime(now()), voucherID, old)
	if err != nil {
		return false, wrap(fmt.Sprintf("compare and set remaining of voucher %d", voucherID), checkError(err, newN))
	}
	return oneRow(res, fmt.Sprintf("compare and set remaining of voucher %d", voucherID))
}

// DecrementRemaining takes n from the remaining stock if at least n is left,
// and reports whether it did. It reports false as well when the voucher does
// not exist (telling the two apart would cost every sold-out buyer a second
// query). n must be positive.
func (q Queries) DecrementRemaining(ctx context.Context, voucherID int64, n int) (bool, error) {
	if n <= 0 {
		return false, flashsale.Errorf(flashsale.EInvalid, "cannot decrement stock by %d", n)
	}
	return q.decrement(ctx, voucherID, n, 0, "")
}

// decrement is DecrementRemaining that also adds live to the voucher's
// count of live orders (countLive) and, unless placed is "", sets its
// placed_orders to placed (appendIDs of the orders it places, whose
// order.placed the trigger of migration 00013 writes): on a hot voucher
// one statement, the row's one write inside its lock.
func (q Queries) decrement(ctx context.Context, voucherID int64, n, live int, placed string) (bool, error) {
	set, args := "remaining = remaining - ?", []any{n}
	if live != 0 {
		set, args = set+", live_orders = live_orders + ?", append(args, live)
	}
	if placed != "" {
		set, args = set+", placed_orders = ?", append(args, placed)
	}
	res, err := q.w.ExecContext(ctx, "UPDATE vouchers SET "+set+", updated_at = ? WHERE id = ? AND remaining >= ?", append(args, dbTime(now()), voucherID, n)...)
	if err != nil {
		return false, wrap(fmt.Sprintf("decrement remaining of voucher %d", voucherID), err)
	}
	return oneRow(res, fmt.Sprintf("decrement remaining of voucher %d", voucherID))
}

// placedData returns the placed argument of decrement for orders' ids:
// "" when the transaction writes no events.
func (tx *Tx) placedData(ids []int64) string {
	if tx.noOutbox || len(ids) == 0 {
		return ""
	}
	return string(appendIDs(nil, ids))
}

// placedOnInsert reports whether PlaceOrder's insert writes its
// order.placed (migration 00015, MySQL), not its decrement.
func (tx *Tx) placedOnInsert() bool { return !tx.noOutbox && tx.dialect == MySQL }

// unmarkPlaced clears the session variable of migration 00015 after
// PlaceOrder's insert failed: the trigger that clears it did not run, and
// the connection goes back to the pool. Its error is the connection's,
// which the pool then drops with the variable.
func (tx *Tx) unmarkPlaced() {
	_, _ = tx.w.ExecContext(context.Background(), "SET @flashsale_placed = NULL")
}

// PlaceOrder stores o as a new order, as InsertOrder does (created, or
// awaiting payment with a PayBy), and then takes its units from its
// voucher's remaining stock if that many are left, as DecrementRemaining
// does, counting o among the voucher's live orders in the same statement
// (decrement). Its order.placed is written by the database: on MySQL by a
// trigger on the order's insert (migration 00015), on SQLite by the
// decrement's. The decrement is the transaction's last statement on
// purpose: on a hot voucher every buyer waits for that row, and it is
// then held only by one statement and the commit, not by the order's own
// writes, nor its event's, too. It reports whether it took
// the units; when it did not (sold out), o is inserted all the same and
// the caller must roll the transaction back. Its locks come buyer's units
// first, voucher's row last, where a cancel or expiry takes the voucher's
// row first: a buyer cancelling one order while placing another of the
// same voucher (a limit above 1) can deadlock with himself, and InnoDB
// rolls one back — a cancel is retried (txRetrying), this returns EBusy
// (the strategies try their transaction again). A rollback after a
// sold-out decrement can also deadlock the same buyer's other clicks,
// which wait on the rolled-back rows' keys: EBusy again.
func (tx *Tx) PlaceOrder(ctx context.Context, o *flashsale.Order, limit int) (bool, error) {
	if o.Units() <= 0 {
		return false, flashsale.Errorf(flashsale.EInvalid, "cannot decrement stock by %d", o.Units())
	}
	if status := cmp.Or(o.Status, flashsale.StatusCreated); status != flashsale.StatusCreated && status != flashsale.StatusAwaitingPayment {
		return false, flashsale.Errorf(flashsale.EInvalid, "order %d takes its stock with PlaceOrder: it is created or awaiting payment, not %q", o.ID, status)
	}
	if tx.liveCounted == nil {
		tx.liveCounted = map[int64]bool{}
	}
	// Counted by the decrement below, not by the insert; its event
	// written by neither InsertOrder nor the Tx (placedOnInsert).
	tx.liveCounted[o.ID] = true
	if err := tx.InsertOrder(ctx, o, limit); err != nil {
		return false, err
	}
	placed := ""
	if !tx.placedOnInsert() {
		placed = tx.placedData([]int64{o.ID})
	}
	return tx.decrement(ctx, o.VoucherID, o.Units(), 1, placed)
}

// oneRow reports whether an update matched a row. The MySQL connection uses
// clientFoundRows, so both dialects count matched rows, not changed ones.
func oneRow(res sql.Result, op string) (bool, error) {
	n, err := res.RowsAffected()
	if err != nil {
		return false, wrap(op, err)
	}
	return n == 1, nil
}

// checkError turns a CHECK violation on remaining into EInvalid, keeping the
// driver error in the chain.
func checkError(err error, n int) error {
	if isCheckViolation(err) {
		return fmt.Errorf("%w: %w", flashsale.Errorf(flashsale.EInvalid, "remaining stock %d is negative or above the stock", n), err)
	}
	return err
}

// voucherNotFound is the ENotFound error for a voucher id.
func voucherNotFound(id int64) error {
	return flashsale.Errorf(flashsale.ENotFound, "voucher %d not found", id)
}
