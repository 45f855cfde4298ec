package lifecycle

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// ExpirerConfig configures Run.
type ExpirerConfig struct {
	// Every is how often the expirer looks for due orders (default 100ms):
	// with a Restocker's stock seen at once, a unit is buyable again at
	// most about this long after its order's pay_by.
	Every time.Duration
	// Batch bounds the orders of one transaction (default 500).
	Batch int
	// SweepAfter is how long a return may stay pending before the sweep
	// finishes it (default 5s): longer than a return takes, so the sweep
	// does not race the instance doing it.
	SweepAfter time.Duration
	// ObserveLag, when set, is called with how late each order expired
	// after its pay_by.
	ObserveLag func(time.Duration)
}

func (c ExpirerConfig) withDefaults() ExpirerConfig {
	if c.Every <= 0 {
		c.Every = 100 * time.Millisecond
	}
	if c.Batch <= 0 {
		c.Batch = 500
	}
	if c.SweepAfter <= 0 {
		c.SweepAfter = 5 * time.Second
	}
	return c
}

// Run expires due orders and finishes pending returns until ctx ends, then
// returns ErrStopped. Every instance may run one: each order expires once
// whoever runs, and a pass that fails (the database is down) is logged and
// tried again at the next tick, so expiries wait and none is lost.
func (s *Service) Run(ctx context.Context, cfg ExpirerConfig) error {
	cfg = cfg.withDefaults()
	tick := time.NewTicker(cfg.Every)
	defer tick.Stop()
	var lastSweep time.Time
	for {
		if err := s.ExpireDue(ctx, cfg); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "lifecycle: expiring due orders failed; retrying", "err", err)
		}
		if time.Since(lastSweep) >= cfg.SweepAfter/2 {
			lastSweep = time.Now()
			if err := s.SweepReturns(ctx, cfg); err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "lifecycle: finishing pending returns failed; retrying", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return ErrStopped
		case <-tick.C:
		}
	}
}

// ExpireDue expires every order due now, a batch per transaction, and
// puts their units back on sale.
func (s *Service) ExpireDue(ctx context.Context, cfg ExpirerConfig) error {
	cfg = cfg.withDefaults()
	for {
		now := s.now()
		orders, err := s.db.ExpireDue(ctx, now, cfg.Batch)
		if err != nil {
			return err
		}
		s.stats.expired.Add(int64(len(orders)))
		if cfg.ObserveLag != nil {
			for _, o := range orders {
				cfg.ObserveLag(now.Sub(o.PayBy))
			}
		}
		s.finish(ctx, orders)
		if len(orders) < cfg.Batch {
			return nil
		}
	}
}

// SweepReturns finishes the returns a crashed or failed instance left
// pending for longer than cfg.SweepAfter.
func (s *Service) SweepReturns(ctx context.Context, cfg ExpirerConfig) error {
	cfg = cfg.withDefaults()
	for {
		orders, err := s.db.PendingReturns(ctx, s.now().Add(-cfg.SweepAfter), cfg.Batch)
		if err != nil {
			return err
		}
		if err := s.complete(ctx, orders); err != nil {
			return err
		}
		s.stats.swept.Add(int64(len(orders)))
		if len(orders) < cfg.Batch {
			return nil
		}
	}
}

// Stats counts what a Service did since it started.
type Stats struct {
	Paid, Cancelled, Expired int64
	// Returned counts the units put back on sale; Swept the orders whose
	// returns the sweep finished for an instance that did not.
	Returned, Swept int64
}

type counters struct {
	paid, cancelled, expired, returned, swept atomic.Int64
}

// Stats returns the Service's counts.
func (s *Service) Stats() Stats {
	return Stats{
		Paid: s.stats.paid.Load(), Cancelled: s.stats.cancelled.Load(), Expired: s.stats.expired.Load(),
		Returned: s.stats.returned.Load(), Swept: s.stats.swept.Load(),
	}
}

var _ interface {
	CancelOrder(ctx context.Context, id, userID int64) (*flashsale.Order, error)
	PayOrder(ctx context.Context, p flashsale.Payment) (*flashsale.Order, error)
} = (*Service)(nil)
