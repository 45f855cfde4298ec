package strategy

import (
	"context"
	"sync"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// naive reads the stock, checks it, writes back the absolute new value and
// inserts the order, with no transaction: two buyers who read the same
// stock both write stock-1 (a lost update) and both get an order.
type naive struct{ *base }

var _ flashsale.OrderService = (*naive)(nil)

func (s *naive) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	v, err := s.open(ctx, req)
	if err != nil {
		return nil, err
	}
	return s.take(ctx, v, req)
}

func (s *naive) take(ctx context.Context, v *flashsale.Voucher, req flashsale.OrderRequest) (*flashsale.Order, error) {
	n, err := s.readStock(ctx, v, req)
	if err != nil {
		return nil, err
	}
	db := s.cfg.DB
	if err := db.SetRemaining(ctx, v.ID, n-req.Units()); err != nil {
		return nil, err
	}
	o, err := s.newOrder(ctx, v, req)
	if err != nil {
		return nil, err
	}
	// A duplicate here leaves the stock already decremented: the naive
	// design's bug, kept on purpose so the lab can count it as stock drift.
	return o, db.InsertOrder(ctx, o, v.BuyerLimit())
}

// mutex runs naive under one in-process mutex per voucher, the Go version
// of Java's synchronized: correct while a single instance serves a voucher,
// wrong as soon as two do.
type mutex struct {
	*base
	mu sync.Map // voucher id → *sync.Mutex
}

var _ flashsale.OrderService = (*mutex)(nil)

func (s *mutex) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	v, err := s.open(ctx, req)
	if err != nil {
		return nil, err
	}
	m, _ := s.mu.LoadOrStore(v.ID, new(sync.Mutex))
	m.(*sync.Mutex).Lock()
	defer m.(*sync.Mutex).Unlock()
	return (&naive{s.base}).take(ctx, v, req)
}

// optimistic reads the stock and later updates it only if it still holds
// the value read ("WHERE remaining = <value read>"), without retrying:
// no oversell, but every buyer who loses the compare-and-set is refused
// even though stock is left.
type optimistic struct{ *base }

var _ flashsale.OrderService = (*optimistic)(nil)

func (s *optimistic) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	v, err := s.open(ctx, req)
	if err != nil {
		return nil, err
	}
	n, err := s.readStock(ctx, v, req)
	if err != nil {
		return nil, err
	}
	o, err := s.newOrder(ctx, v, req)
	if err != nil {
		return nil, err
	}
	err = s.cfg.DB.Tx(ctx, func(tx *store.Tx) error {
		ok, err := tx.CompareAndSetRemaining(ctx, v.ID, n, n-o.Units())
		if err != nil {
			return err
		}
		if !ok {
			return flashsale.Errorf(flashsale.ESoldOut, "the stock changed while ordering; try again")
		}
		return tx.InsertOrder(ctx, o, v.BuyerLimit())
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// readStock is the read half of the unsafe strategies' read-then-write
// (and stocklock's, under its lock): refuse a buyer at the limit, read the
// stock outside any transaction, refuse when fewer units than asked are
// left, then wait the race window before the caller writes.
func (b *base) readStock(ctx context.Context, v *flashsale.Voucher, req flashsale.OrderRequest) (int, error) {
	db := b.cfg.DB
	units, latest, err := db.BuyerUnits(ctx, v.ID, req.UserID)
	if err != nil {
		return 0, err
	}
	if err := overLimit(v, units, req.Units(), latest); err != nil {
		return 0, err
	}
	n, err := db.Remaining(ctx, v.ID)
	if err != nil {
		return 0, err
	}
	if n < req.Units() {
		return 0, soldOut()
	}
	return n, b.raceWindow(ctx)
}
