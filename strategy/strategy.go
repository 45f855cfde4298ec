// Package strategy implements the synchronous ways to take an order, from
// the one that oversells to the safe ones, so
// the load lab can run them side by side:
//
//   - naive: read stock, check, write the new absolute stock, insert the
//     order; loses updates and oversells.
//   - mutex: naive under an in-process mutex (Java's synchronized); safe
//     on one instance only.
//   - optimistic: compare-and-set on the stock that was read, no retry
//     (the first optimistic lock people write); never oversells but refuses
//     buyers while stock is left.
//   - conditional: UPDATE … SET remaining = remaining - 1 WHERE … AND
//     remaining > 0 and the order insert in one transaction.
//   - lock: a per-user distributed lock (package lock) around the check for
//     an existing order, the conditional decrement and the insert.
//   - stocklock: one distributed lock per voucher around naive's
//     read-check-write (one "stock" lock over the whole order), its stock
//     write fenced by the lock's token.
//   - batch: conditional's guarantees with group commit: the concurrent
//     orders of one voucher share one transaction, one decrement and one
//     multi-row insert.
//
// In every strategy the database's buyer_units CHECK stays the last line of
// defence for the limit per buyer; a race that would have taken a buyer
// past it surfaces as EDuplicateOrder (a limit of 1) or ELimitReached.
// Every strategy cancels, pays and expires orders through package
// lifecycle; the unsafe ones refuse vouchers with a payment window or a
// limit above 1 (NewVoucherService).
package strategy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/vouchercache"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/lock"
	"github.com/flashsale/flashsale/store"
)

// Names lists the synchronous strategies, from the unsafe to the safe.
var Names = []string{"naive", "mutex", "optimistic", "conditional", "lock", "stocklock", "batch"}

// Config holds what the strategies need.
type Config struct {
	DB  *store.DB
	IDs flashsale.IDGenerator
	// Locks is required by the lock strategy, and by stocklock unless
	// Locker is set.
	Locks *lock.Client
	// Locker is stocklock's per-voucher lock; by default
	// LockLocker(Locks, LockLease). The lab sets its broken locks here.
	Locker Locker
	// LockLease is the fixed lease of stocklock's default Locker.
	// Default 10s.
	LockLease time.Duration
	// Pause, lab only, is slept inside stocklock's critical section by
	// every PauseEvery-th acquisition of an instance (default every 20th),
	// to outlast the lease as a GC pause would.
	Pause      time.Duration
	PauseEvery int
	// RaceWindow is slept between reading and writing, like a slow request, to
	// make races visible. Zero by default. The batch strategy has no such
	// gap to widen (it reads and writes in one store call under the
	// voucher's row lock) and ignores it.
	RaceWindow time.Duration
	// LockWait bounds how long the lock strategy waits for a buyer's lock
	// before answering EBusy. Default 1s.
	LockWait time.Duration
	// BatchMax caps the orders of one batch of the batch strategy. Default
	// 500.
	BatchMax int
	// Now is the clock for the sale window and payment windows; time.Now
	// by default.
	Now func() time.Time
	// Lifecycle cancels and pays orders; by default one on DB without a
	// Restocker. Serve passes the one whose expirer it runs.
	Lifecycle *lifecycle.Service
}

// New returns the named strategy.
func New(name string, cfg Config) (flashsale.OrderService, error) {
	if cfg.DB == nil || cfg.IDs == nil {
		return nil, errors.New("strategy: DB and IDs are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LockWait <= 0 {
		cfg.LockWait = time.Second
	}
	if cfg.LockLease <= 0 {
		cfg.LockLease = 10 * time.Second
	}
	if cfg.PauseEvery <= 0 {
		cfg.PauseEvery = 20
	}
	if cfg.BatchMax <= 0 {
		cfg.BatchMax = defaultBatchMax
	}
	if cfg.Lifecycle == nil {
		cfg.Lifecycle = lifecycle.New(cfg.DB, lifecycle.Config{Now: cfg.Now})
	}
	s, err := newStrategy(name, &base{cfg: cfg, Service: cfg.Lifecycle, rows: vouchercache.New(cfg.DB.Voucher, 0)})
	if err != nil {
		return nil, err
	}
	return keyed{s, cfg.DB}, nil
}

// newStrategy returns the named strategy on b.
func newStrategy(name string, b *base) (flashsale.OrderService, error) {
	cfg := b.cfg
	switch name {
	case "naive":
		return &naive{b}, nil
	case "mutex":
		return &mutex{base: b}, nil
	case "optimistic":
		return &optimistic{b}, nil
	case "conditional":
		return &conditional{b}, nil
	case "lock":
		if cfg.Locks == nil {
			return nil, errors.New("strategy: the lock strategy needs a lock client")
		}
		return &locked{b}, nil
	case "stocklock":
		if cfg.Locker == nil && cfg.Locks == nil {
			return nil, errors.New("strategy: the stocklock strategy needs a lock client or a Locker")
		}
		if b.cfg.Locker == nil {
			b.cfg.Locker = LockLocker(cfg.Locks, cfg.LockLease)
		}
		return &stocklock{base: b}, nil
	case "batch":
		return &batch{base: b}, nil
	default:
		return nil, fmt.Errorf("strategy: unknown strategy %q", name)
	}
}

// keyed answers a request whose idempotency key placed an order already
// with that order: a retry after the instance that placed it died before it
// answered (see package idempotency), or a request that outlived its
// idempotency lease while the retry ran. The key's unique index in the
// store refuses a second order of one key that races past this check,
// and the refused one gets the first's order.
type keyed struct {
	flashsale.OrderService
	db *store.DB
}

func (s keyed) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	if req.IdempotencyKey != "" {
		o, err := s.db.FindOrderByKey(ctx, req.VoucherID, req.UserID, req.IdempotencyKey)
		if flashsale.ErrorCode(err) != flashsale.ENotFound {
			return o, err
		}
	}
	o, err := s.OrderService.PlaceOrder(ctx, req)
	if errors.Is(err, store.ErrKeyTaken) { // the first request, still running, got there first
		return s.db.FindOrderByKey(ctx, req.VoucherID, req.UserID, req.IdempotencyKey)
	}
	return o, err
}

// base holds what every strategy shares: the sale-window check on cached
// voucher metadata, order construction, order lookup, and the order's life
// after it is placed (the embedded lifecycle.Service).
type base struct {
	*lifecycle.Service
	cfg Config
	// rows caches each voucher's row, so one read serves every later
	// order; its stock figures are not read from it.
	rows *vouchercache.Cache
}

// open checks that the voucher exists and is on sale now, and that the
// request's quantity is within the voucher's limit, and returns it.
func (b *base) open(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Voucher, error) {
	if req.UserID <= 0 {
		return nil, flashsale.Errorf(flashsale.EInvalid, "user id must be positive")
	}
	voucher, err := b.rows.Voucher(ctx, req.VoucherID)
	if err != nil {
		return nil, err
	}
	if err := flashsale.CheckQuantity(voucher, req); err != nil {
		return nil, err
	}
	return voucher, voucher.CheckWindow(b.cfg.Now())
}

// newOrder returns a new order of the request with a fresh id: awaiting
// payment until now plus the voucher's payment window, or created when it
// has none.
func (b *base) newOrder(ctx context.Context, v *flashsale.Voucher, req flashsale.OrderRequest) (*flashsale.Order, error) {
	id, err := b.cfg.IDs.NextID(ctx)
	if err != nil {
		return nil, idError(err)
	}
	o := &flashsale.Order{ID: id, VoucherID: v.ID, UserID: req.UserID, Quantity: req.Units(), Status: flashsale.StatusCreated, IdempotencyKey: req.IdempotencyKey}
	if w := v.PaymentWindow(); w > 0 {
		o.Status, o.PayBy = flashsale.StatusAwaitingPayment, b.cfg.Now().Add(w).UTC().Truncate(flashsale.TimePrecision)
	}
	return o, nil
}

// FindOrder returns an order from the database.
func (b *base) FindOrder(ctx context.Context, id int64) (*flashsale.Order, error) {
	return b.cfg.DB.FindOrder(ctx, id)
}

// raceWindow sleeps the configured race window, or until ctx is done.
func (b *base) raceWindow(ctx context.Context) error {
	return sleep(ctx, b.cfg.RaceWindow)
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// overLimit returns the refusal of an order of q units by a buyer whose
// live orders hold units, the latest of them latest, or nil when it fits.
func overLimit(v *flashsale.Voucher, units, q int, latest int64) error {
	switch {
	case units+q <= v.BuyerLimit():
		return nil
	case v.BuyerLimit() == 1 && latest > 0:
		return flashsale.Errorf(flashsale.EDuplicateOrder, "you already have order %d for this voucher", latest)
	case v.BuyerLimit() == 1:
		return duplicateOrder()
	}
	return flashsale.Errorf(flashsale.ELimitReached, "a buyer may hold %d units of this voucher; your orders hold %d", v.BuyerLimit(), units)
}

// idError reports a failure to get an id as EUnavailable, keeping the cause
// in the chain for the log: without ids nothing can be sold, but it passes.
func idError(err error) error {
	return fmt.Errorf("%w: %w", &flashsale.Error{Code: flashsale.EUnavailable, Message: "order ids are unavailable; try again shortly", RetryAfter: time.Second}, err)
}

func soldOut() error { return flashsale.Errorf(flashsale.ESoldOut, "sold out") }

func duplicateOrder() error {
	return flashsale.Errorf(flashsale.EDuplicateOrder, "you already have an order for this voucher")
}
