package strategy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lock"
	"github.com/flashsale/flashsale/store"
)

// Locker takes the named lock of the stocklock strategy. Serve uses the
// fenced lock of package lock (LockLocker); the load lab plugs in the
// seeds' broken locks through it, to show what they let through.
type Locker interface {
	// Lock waits for the lock until it is obtained or ctx is done.
	Lock(ctx context.Context, name string) (Held, error)
}

// Held is one hold of a Locker's lock.
type Held interface {
	// Fence returns the fencing token of the hold, 0 if the lock has none.
	Fence() int64
	// Unlock releases the hold.
	Unlock(ctx context.Context) error
}

// ErrStaleLock is in the chain of the error stocklock returns when its
// stock write was refused because a later holder of the voucher's lock
// wrote first: this holder's lease had run out.
var ErrStaleLock = errors.New("strategy: stale stock lock")

// LockLocker returns the Locker of package lock: each hold has a fixed
// lease (lock.WithLease), as the seeds' locks do, and a fencing token.
func LockLocker(c *lock.Client, lease time.Duration) Locker {
	return &lockLocker{c: c, lease: lease}
}

type lockLocker struct {
	c     *lock.Client
	lease time.Duration
}

func (l *lockLocker) Lock(ctx context.Context, name string) (Held, error) {
	h, err := l.c.Mutex(name, lock.WithLease(l.lease)).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// stocklock takes one lock per voucher around naive's read-check-write
// (the seeds' "one 'stock' lock for the whole order"): buyers of a voucher
// are served one at a time, on every instance. A holder paused past its
// lease writes stock that a later holder has changed; with a fenced lock
// that write is refused — each holder claims the voucher's stock fence
// before it reads (ClaimStockFence) and writes only if no later holder
// claimed it since (SetRemainingFenced) — with the seeds' locks it
// oversells.
type stocklock struct {
	*base
	holds atomic.Int64 // acquisitions in this instance, for PauseEvery
}

var _ flashsale.OrderService = (*stocklock)(nil)

func (s *stocklock) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	v, err := s.open(ctx, req)
	if err != nil {
		return nil, err
	}
	// The id first: nothing may fail between the stock write and the
	// insert, which commit together (takeStock).
	o, err := s.newOrder(ctx, v, req)
	if err != nil {
		return nil, err
	}
	voucherID := v.ID
	waitCtx, cancel := context.WithTimeout(ctx, s.cfg.LockWait)
	defer cancel()
	h, err := s.cfg.Locker.Lock(waitCtx, "stock:"+strconv.FormatInt(voucherID, 10))
	if err != nil {
		return nil, lockError(ctx, "stock lock", err)
	}
	defer h.Unlock(context.WithoutCancel(ctx)) //nolint:errcheck // a lock that ran out has nothing left to release
	if f := h.Fence(); f > 0 {
		// Claim the stock before reading it: a holder whose lease ran out
		// after it read, and before this claim, cannot write any more.
		if ok, err := s.cfg.DB.ClaimStockFence(ctx, voucherID, f); err != nil || !ok {
			return nil, cmp.Or(err, staleLock())
		}
	}
	if err := s.takeStock(ctx, h, v, req, o); err != nil {
		return nil, err
	}
	return o, nil
}

// takeStock is the read-check-write of stock under the voucher's lock h,
// the write committed in one transaction with the insert of o, so that a
// failed insert (a buyer who hung up) takes no unit. With a fenced lock
// the write is refused when a later holder claimed the stock, and read
// again when a cancel or expiry gave units back since the read (returns
// take no stock lock: they add, and the write must not undo them).
func (s *stocklock) takeStock(ctx context.Context, h Held, v *flashsale.Voucher, req flashsale.OrderRequest, o *flashsale.Order) error {
	n, err := s.readStock(ctx, v, req)
	if err != nil {
		return err
	}
	if err := s.pause(ctx); err != nil {
		return err
	}
	q := req.Units()
	f := h.Fence()
	if f <= 0 { // the lab's broken locks: the seeds' plain write
		return s.cfg.DB.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.SetRemaining(ctx, v.ID, n-q); err != nil {
				return err
			}
			return tx.InsertOrder(ctx, o, v.BuyerLimit())
		})
	}
	for {
		var ok bool
		err := s.cfg.DB.Tx(ctx, func(tx *store.Tx) error {
			var err error
			if ok, err = tx.SetRemainingFenced(ctx, v.ID, n, n-q, f); err != nil || !ok {
				return err
			}
			return tx.InsertOrder(ctx, o, v.BuyerLimit())
		})
		if !errors.Is(err, store.ErrStockMoved) {
			if err == nil && !ok {
				return staleLock()
			}
			return err
		}
		if n, err = s.readStock(ctx, v, req); err != nil {
			return err
		}
	}
}

// staleLock is the EBusy error of a holder whose fence was refused.
func staleLock() error {
	return fmt.Errorf("%w: %w", &flashsale.Error{Code: flashsale.EBusy, Message: "the stock lock ran out before the stock was written; try again", RetryAfter: time.Second}, ErrStaleLock)
}

// pause sleeps Config.Pause inside the critical section of every
// PauseEvery-th acquisition: the lab's stand-in for a GC pause or a slow
// call that outlasts the lease.
func (s *stocklock) pause(ctx context.Context) error {
	if s.cfg.Pause <= 0 || (s.holds.Add(1)-1)%int64(s.cfg.PauseEvery) != 0 {
		return nil
	}
	return sleep(ctx, s.cfg.Pause)
}

// lockError maps a failure to take a lock (what, for the log): EBusy when
// the wait ran out, EUnavailable when Redis is unreachable, ctx's error
// when the caller gave up.
func lockError(ctx context.Context, what string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return &flashsale.Error{Code: flashsale.EBusy, Message: "too many requests for this order at once; try again later", RetryAfter: time.Second}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("strategy: %s: %w", what, err)
	}
	// Redis unreachable, or the lock client closing: nothing can be sold
	// safely until it is back, but it passes.
	return fmt.Errorf("%w: strategy: %s: %w", &flashsale.Error{Code: flashsale.EUnavailable, Message: "the order lock is unavailable; try again shortly", RetryAfter: time.Second}, what, err)
}
