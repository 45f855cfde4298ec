// Package lifecycle ends orders after they are placed: a buyer's cancel,
// the payment provider's payment, and expiry at pay_by, and it puts the
// units of every cancelled or expired order back on sale exactly once
// (docs/lifecycle.md). It runs the same for every strategy; what differs
// is where a strategy sells from, which a Restocker says.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/flashsale"
)

// Store is the system of record's side of an order's life; *store.DB
// implements it. Each transition is conditional on the status it leaves,
// so it happens once however many instances try, and leaves the units it
// gave back marked pending until MarkReturned.
type Store interface {
	// PayOrder and CancelOrder report whether they changed the order:
	// the same payment or cancel again answers the same and changes
	// nothing.
	PayOrder(ctx context.Context, p flashsale.Payment, now time.Time) (o *flashsale.Order, changed bool, err error)
	CancelOrder(ctx context.Context, id, userID int64, now time.Time) (o *flashsale.Order, changed bool, err error)
	ExpireDue(ctx context.Context, now time.Time, max int) ([]*flashsale.Order, error)
	NextDue(ctx context.Context) (time.Time, error)
	PendingReturns(ctx context.Context, before time.Time, max int) ([]*flashsale.Order, error)
	MarkReturned(ctx context.Context, ids []int64) error
}

// Restocker puts the units of closed orders back where a strategy sells
// from, when that is not the system of record itself: the async gate's
// stock in Redis. Restock must be idempotent per order: a crash can make
// it run twice for one.
type Restocker interface {
	Restock(ctx context.Context, orders []*flashsale.Order) error
}

// Service cancels and pays orders. It is safe for concurrent use.
type Service struct {
	db      Store
	restock Restocker
	now     func() time.Time
	log     *slog.Logger
	stats   counters
}

// Config configures a Service and its Expirer.
type Config struct {
	// Restocker is nil when the store's stock is what is sold from.
	Restocker Restocker
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger gets what goes wrong off the request path (default
	// slog.Default()).
	Logger *slog.Logger
}

// New returns a Service on the store.
func New(db Store, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{db: db, restock: cfg.Restocker, now: cfg.Now, log: cfg.Logger}
}

// CancelOrder cancels the user's order, which must await payment, and puts
// its units back on sale. The same cancel again answers the same. It
// returns ENotFound for another user's order, EAlreadyPaid, or
// EOrderClosed (expired, or final without a payment step).
func (s *Service) CancelOrder(ctx context.Context, id, userID int64) (*flashsale.Order, error) {
	o, changed, err := s.db.CancelOrder(ctx, id, userID, s.now())
	if err != nil || !changed {
		// A cancel sent again finishes nothing: a return its first left
		// pending is the sweep's.
		return o, err
	}
	s.stats.cancelled.Add(1)
	s.finish(ctx, []*flashsale.Order{o})
	return o, nil
}

// PayOrder records the provider's payment of an order awaiting payment.
// The same payment again answers the same. It returns ENotFound,
// EAlreadyPaid (another payment paid it), EOrderClosed (cancelled, expired
// or final: the provider refunds) or EInvalid (a wrong amount).
func (s *Service) PayOrder(ctx context.Context, p flashsale.Payment) (*flashsale.Order, error) {
	o, changed, err := s.db.PayOrder(ctx, p, s.now())
	if changed {
		s.stats.paid.Add(1)
	}
	return o, err
}

// finish runs the second half of the orders' returns and marks them done.
// A failure is logged, not returned: the transition stands, and the
// Expirer's sweep of pending returns finishes it.
func (s *Service) finish(ctx context.Context, orders []*flashsale.Order) {
	if err := s.complete(ctx, orders); err != nil {
		s.log.WarnContext(ctx, "lifecycle: a return is left pending; the sweep finishes it", "orders", len(orders), "err", err)
	}
}

// complete runs the second half of the orders' returns and marks them done.
func (s *Service) complete(ctx context.Context, orders []*flashsale.Order) error {
	if len(orders) == 0 {
		return nil
	}
	// The return must not be cut short by a caller that stops waiting:
	// the transition it finishes is committed.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), returnTimeout)
	defer cancel()
	if s.restock != nil {
		if err := s.restock.Restock(ctx, orders); err != nil {
			return fmt.Errorf("lifecycle: restock: %w", err)
		}
	}
	ids := make([]int64, len(orders))
	units := 0
	for i, o := range orders {
		ids[i] = o.ID
		units += o.Units()
	}
	if err := s.db.MarkReturned(ctx, ids); err != nil {
		return fmt.Errorf("lifecycle: mark returned: %w", err)
	}
	s.stats.returned.Add(int64(units))
	return nil
}

// returnTimeout bounds the second half of a batch of returns.
const returnTimeout = 10 * time.Second

// ErrStopped is returned by Expirer.Run when its context ends.
var ErrStopped = errors.New("lifecycle: expirer stopped")
