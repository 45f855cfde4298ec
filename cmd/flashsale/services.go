package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/idempotency"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/lock"
	"github.com/flashsale/flashsale/strategy"
)

// What serve runs for a strategy: its services, built by the strategy
// table's entries, and what runs beside the HTTP server.

// runBackground starts what an instance runs beside its server — the
// expirer, and for async with --consume the consumer — and returns what
// stops them and waits for them.
func runBackground(svc *services, cfg serveConfig) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = svc.life.Run(ctx, lifecycle.ExpirerConfig{Every: cfg.expireEvery, ObserveLag: svc.observeLag})
	})
	if svc.consumer != nil && cfg.consume {
		wg.Go(func() { _ = svc.consumer.Run(ctx) })
	}
	if svc.queue != nil {
		wg.Go(func() { _ = svc.queue.Run(ctx) })
	}
	return func() { cancel(); wg.Wait() }
}

// services are what serve runs for one strategy.
type services struct {
	vouchers flashsale.VoucherService
	orders   flashsale.OrderService
	// life cancels, pays and expires orders; serve runs its expirer.
	life       *lifecycle.Service
	observeLag func(time.Duration) // observe.go
	consumer   *consume.Consumer   // async only
	locks      *lock.Client        // the lock strategy only
	queue      *admission.Queue    // the waiting room of queue vouchers
	ready      httpapi.ReadyFunc
	close      func()
	// hashTag places a buyer's idempotency keys (async: in its shard).
	hashTag func(ctx context.Context, voucherID, userID int64) string
}

// newServices builds the voucher and order services for the strategy.
func newServices(cfg serveConfig, b *backends, log *slog.Logger) (*services, error) {
	entry, ok := lookupStrategy(cfg.strategy)
	if !ok {
		return nil, fmt.Errorf("strategy: unknown strategy %q", cfg.strategy)
	}
	svc, err := entry.build(cfg, b, log)
	if err != nil {
		return nil, err
	}
	if svc.queue, err = newQueue(cfg, b); err != nil { // admission.go
		svc.close()
		return nil, err
	}
	// The pass is checked inside idempotency: a retry of an accepted order
	// gets its answer without a second pass.
	svc.orders = idempotency.Wrap(admission.Wrap(svc.orders, svc.queue), b.redis, idempotency.Config{Prefix: b.prefix, HashTag: svc.hashTag})
	return svc, nil
}

// validateAsync checks the consumer's flags when serve runs one.
func validateAsync(c *serveConfig) error {
	if err := c.durability.validate(); err != nil {
		return err
	}
	if c.consume {
		return c.consumer.validate()
	}
	return nil
}

// newAsyncServices builds the async strategy: the Redis gate's service
// and, to run if --consume, a stream consumer.
func newAsyncServices(cfg serveConfig, b *backends, log *slog.Logger) (*services, error) {
	if err := cfg.durability.check(b.redis, log); err != nil {
		return nil, err
	}
	acfg := async.Config{Prefix: b.prefix, OrderIDs: b.ids, Logger: log, Durability: cfg.durability.config(), MaxPending: cfg.maxPending, MaxGateWait: cfg.maxGateWait,
		ShardLinger: cmp.Or(cfg.shardLinger, -1)} // the flag's 0 is never, the Config's the default
	restock, err := withFaults(async.Returns(b.redis, acfg))
	if err != nil {
		return nil, err
	}
	acfg.Lifecycle = lifecycle.New(b.db, lifecycle.Config{Restocker: restock, Logger: log})
	svc, err := async.NewService(b.redis, b.db, acfg)
	if err != nil {
		return nil, err
	}
	ready := b.ready // the backlog is the dashboard's and the metrics', for the admin
	stopEpoch := watchEpoch(svc, log)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { svc.WatchReturns(ctx) })
	stopWatch := func() { stopEpoch(); cancel(); wg.Wait() }
	return &services{vouchers: svc, orders: svc, life: acfg.Lifecycle, consumer: cfg.consumer.new(b, acfg.Durability, log), ready: ready, close: stopWatch,
		hashTag: svc.BuyerHashTag}, nil
}

// newSyncServices builds one of the synchronous strategies, with a lock
// client for the lock strategy.
func newSyncServices(cfg serveConfig, b *backends, log *slog.Logger) (*services, error) {
	locks := lock.New(b.redis, lock.WithPrefix(b.prefix+"lock:"))
	scfg := strategy.Config{
		DB:         b.db,
		IDs:        b.ids,
		Locks:      locks,
		RaceWindow: cfg.raceWindow,
		LockWait:   cfg.lockWait,
	}
	// The gate's Restocker too: an instance of any strategy expires the due
	// orders of every voucher in the database, and an async voucher's
	// units go back into the gate's stock (a voucher the gate does not hold
	// is left alone there).
	restock, err := withFaults(async.Returns(b.redis, async.Config{Prefix: b.prefix, Durability: cfg.durability.config()}))
	if err != nil {
		locks.Close()
		return nil, err
	}
	scfg.Lifecycle = lifecycle.New(b.db, lifecycle.Config{Restocker: restock, Logger: log})
	if err := cfg.locks.config(&scfg, b); err != nil {
		locks.Close()
		return nil, err
	}
	orders, err := strategy.New(cfg.strategy, scfg)
	if err != nil {
		locks.Close()
		return nil, err
	}
	svc := &services{vouchers: strategy.NewVoucherService(b.db, b.ids, cfg.strategy), orders: orders, life: scfg.Lifecycle, ready: b.ready, close: func() { locks.Close() }}
	if cfg.strategy == "lock" {
		svc.locks = locks
	}
	return svc, nil
}
