package strategy

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// conditional decrements with "remaining >= q" in the WHERE clause and
// inserts the order in the same transaction, so the database serialises
// buyers on the voucher's row and buyer_units' CHECK rolls back an order
// that takes its buyer past the limit.
type conditional struct{ *base }

var _ flashsale.OrderService = (*conditional)(nil)

func (s *conditional) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	v, err := s.open(ctx, req)
	if err != nil {
		return nil, err
	}
	o, err := s.newOrder(ctx, v, req)
	if err != nil {
		return nil, err
	}
	if err := s.takeTx(ctx, v, o); err != nil {
		return nil, err
	}
	return o, nil
}

// takeAttempts bounds takeTx's attempts.
const takeAttempts = 3

// takeTx runs take in a transaction, again (at most takeAttempts in all)
// when InnoDB chose it as a deadlock's victim (EBusy). take writes the
// order before it takes the voucher's row, so a decrement that finds the
// stock gone rolls back rows that the same buyer's other clicks wait on
// (the duplicate key's shared lock), and those waiters can deadlock; the
// next attempt finds the sale sold out, or the buyer's order, at its
// first read.
func (s *base) takeTx(ctx context.Context, v *flashsale.Voucher, o *flashsale.Order) error {
	for attempt := 1; ; attempt++ {
		err := s.cfg.DB.Tx(ctx, func(tx *store.Tx) error { return s.take(ctx, tx, v, o) })
		if err == nil || attempt == takeAttempts || flashsale.ErrorCode(err) != flashsale.EBusy || ctx.Err() != nil {
			return err
		}
	}
}

// take is the transaction both safe strategies run: refuse a buyer at the
// limit or when the stock is gone, insert, decrement conditionally (sold
// out meanwhile: roll back).
func (s *base) take(ctx context.Context, tx *store.Tx, v *flashsale.Voucher, o *flashsale.Order) error {
	// One read for both refusals: after a sale sells out, nearly every
	// buyer is refused here, writing nothing and never waiting for the
	// voucher's row.
	units, latest, left, err := tx.BuyerUnitsAndStock(ctx, v.ID, o.UserID)
	if err != nil {
		return err
	}
	if err := overLimit(v, units, o.Units(), latest); err != nil {
		return err
	}
	if left < o.Units() {
		return soldOut()
	}
	if err := s.raceWindow(ctx); err != nil {
		return err
	}
	// The order's writes first, the voucher's row last (PlaceOrder): every
	// buyer waits for that row, and it is held only by its decrement, which
	// also counts the order live, and COMMIT.
	ok, err := tx.PlaceOrder(ctx, o, v.BuyerLimit())
	if err != nil {
		return err
	}
	if !ok {
		return soldOut()
	}
	return nil
}

// locked holds a distributed lock per buyer and voucher around the same
// transaction, so a buyer's concurrent clicks on any instance run one after
// another and the second finds the first's order.
type locked struct{ *base }

var _ flashsale.OrderService = (*locked)(nil)

func (s *locked) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	v, err := s.open(ctx, req)
	if err != nil {
		return nil, err
	}
	o, err := s.newOrder(ctx, v, req)
	if err != nil {
		return nil, err
	}
	waitCtx, cancel := context.WithTimeout(ctx, s.cfg.LockWait)
	defer cancel()
	l, err := s.cfg.Locks.Mutex(fmt.Sprintf("order:%d:%d", v.ID, req.UserID)).Lock(waitCtx)
	if err != nil {
		return nil, lockError(ctx, "user lock", err)
	}
	defer l.Unlock(context.WithoutCancel(ctx)) //nolint:errcheck // the order is committed or not either way; an expired lock has nothing left to release
	// Run the transaction under the lock's context: if the lock is lost
	// (its lease could not be renewed), the transaction is abandoned.
	if err := s.takeTx(l.Context(), v, o); err != nil {
		return nil, err
	}
	return o, nil
}
