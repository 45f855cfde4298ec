package async

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale"
)

// CancelOrder cancels the user's order awaiting payment and puts its units
// back on sale (see flashsale.OrderService). A pending order is persisted
// first — the same idempotent write the consumer makes — and then
// cancelled.
func (s *Service) CancelOrder(ctx context.Context, id, userID int64) (*flashsale.Order, error) {
	o, err := s.life.CancelOrder(ctx, id, userID)
	if flashsale.ErrorCode(err) == flashsale.ENotFound {
		if err := s.persistPending(ctx, id, userID); err != nil {
			return nil, err
		}
		o, err = s.life.CancelOrder(ctx, id, userID)
	}
	if err == nil {
		s.forgetSoldOut(o.VoucherID) // its units are back: sell them here at once
	}
	return o, err
}

// PayOrder records the payment of an order awaiting payment (see
// flashsale.OrderService). A payment of a pending order counts: it is
// persisted first, and then paid.
func (s *Service) PayOrder(ctx context.Context, p flashsale.Payment) (*flashsale.Order, error) {
	o, err := s.life.PayOrder(ctx, p)
	if flashsale.ErrorCode(err) != flashsale.ENotFound {
		return o, err
	}
	if err := s.persistPending(ctx, p.OrderID, 0); err != nil {
		return nil, err
	}
	return s.life.PayOrder(ctx, p)
}

// persistPending stores an accepted order that is not in MySQL yet (of the
// user, unless userID is 0), from its stream entry. ENotFound when Redis
// knows no such order; EOrderClosed when it failed (dead-lettered, or
// MySQL cannot take it).
func (s *Service) persistPending(ctx context.Context, id, userID int64) error {
	o, err := s.findPending(ctx, id)
	switch {
	case err != nil:
		return err
	case userID != 0 && o.UserID != userID:
		return flashsale.Errorf(flashsale.ENotFound, "order %d not found", id)
	case o.Status != flashsale.StatusPending:
		return failedOrder(id)
	}
	res, err := s.db.PersistOrders(ctx, []flashsale.Order{*o})
	if errors.Is(err, flashsale.ErrStockShort) {
		return fmt.Errorf("%w: %w", failedOrder(id), err)
	}
	if err != nil {
		return err
	}
	if res.Outcomes[0] == flashsale.OutcomeConflict || res.Outcomes[0] == flashsale.OutcomeKeyConflict {
		return failedOrder(id)
	}
	return nil
}

// failedOrder is the refusal to pay or cancel an order that failed.
func failedOrder(id int64) error {
	return flashsale.Errorf(flashsale.EOrderClosed, "order %d failed: it was never persisted, and holds nothing", id)
}
