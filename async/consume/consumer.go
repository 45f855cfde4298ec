package consume

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/async/reconcile"
)

// Config configures a Consumer. Zero fields take the defaults.
type Config struct {
	// Prefix and Group must be the gate's (async.Config).
	Prefix string
	Group  string
	// Name is the consumer's name in the group, unique per process
	// (default hostname-pid-random). A process restarted with the same
	// name first finishes the entries it was delivered before.
	Name string
	// BatchSize is how many orders one read is for and one transaction
	// persists at most (default 500); while Redis is slow, reads take
	// fewer, down to a quarter of it (pace.go).
	BatchSize int
	// Block is how long a read waits for new entries (default 1s).
	Block time.Duration
	// Linger is how long a worker waits after a read that brought under a
	// quarter of BatchSize orders before it reads again, so that the next
	// read finds more (default 20ms; negative: no wait). Each read and its
	// ack cost Redis a fixed part: a voucher of K shards has K streams,
	// each getting 1/K of the orders (pace.go). An order waits that much
	// longer on its way to MySQL; its buyer was answered already.
	Linger time.Duration
	// ClaimIdle is how long an entry delivered to a consumer may stay
	// unacknowledged before another consumer takes it over (default 30s).
	// It must be well above the time a batch takes; a consumer keeps the
	// entries it is retrying its own by touching them every ClaimIdle/3.
	// It is the fallback for a consumer that lives but is stuck: a dead
	// one is noticed by its heartbeat sooner.
	ClaimIdle time.Duration
	// Heartbeat is how long the consumer's heartbeat in Redis lives
	// unless renewed; it is renewed every Heartbeat/5 while Run runs and
	// deleted when Run returns. The entries of a consumer whose heartbeat
	// is gone (it died) are taken over once idle for Heartbeat, within
	// about Heartbeat/5 of that: never a live consumer's (default 5s).
	Heartbeat time.Duration
	// MaxDeliveries: an entry taken over from other consumers, or left to
	// this Name by an earlier process, after more than this many
	// deliveries in all is persisted on its own rather than
	// in a batch, and dead-lettered if that fails for good, or untried once
	// more than this many attempts on its own died (default 5).
	MaxDeliveries int64
	// Refresh is how often the registry of vouchers is read (default 2s).
	Refresh time.Duration
	// RetryMin and RetryMax bound the backoff between attempts to persist
	// a batch after a MySQL error (defaults 100ms and 5s).
	RetryMin, RetryMax time.Duration
	// PersistTimeout bounds one attempt to persist a batch (default
	// ClaimIdle/3), so a hung MySQL connection becomes a retry.
	PersistTimeout time.Duration
	// RetireAfter is how long the keys of a finished sale (over, every
	// order persisted, nothing open in reconciliation) stay in Redis after
	// a consumer found it so (default 1h; negative: forever). Audit is
	// where reconciliation reads MySQL; without it keys are never retired.
	RetireAfter time.Duration
	Audit       reconcile.AuditStore
	// MinReplicas, above 0, is durability replica's (async.Durability):
	// a batch read is persisted only once that many replicas have it
	// (replicated.go); one they do not acknowledge within ReplicaTimeout
	// (default 1s) stays pending and is read again (default 0: persist
	// what is read).
	MinReplicas    int
	ReplicaTimeout time.Duration
	// Logger gets dead letters, retries and lost entries (default
	// slog.Default()).
	Logger *slog.Logger
}

// Stats are a Consumer's counters since New.
type Stats struct {
	// Persisted counts orders this consumer inserted into MySQL;
	// AlreadyPresent those that were there already (redeliveries).
	Persisted, AlreadyPresent uint64
	// DeadLettered counts entries moved to a dead-letter stream.
	DeadLettered uint64
	// Claimed counts entries taken over from other consumers;
	// ClaimedDead those of them taken from consumers whose heartbeat was
	// gone.
	Claimed, ClaimedDead uint64
	// Retries counts failed attempts to persist a batch (MySQL errors).
	Retries uint64
	// Batches counts transactions that persisted a batch.
	Batches uint64
	// Lost counts entries that vanished from a stream while pending: they
	// were deleted by hand, since this package never trims those.
	Lost uint64
	// UnknownVoucher counts batches the database refused because it has
	// no such voucher (flashsale.ErrUnknownVoucher): a configuration
	// error, this consumer reads another database's prefix. Their entries
	// stay pending, handed back for others to take; none is dead-lettered.
	UnknownVoucher uint64
	// Unreplicated counts batches left pending because the replicas did
	// not acknowledge them (Config.MinReplicas).
	Unreplicated uint64
}

// Consumer persists the orders the gate accepted: one worker per
// registered voucher reads the voucher's stream in the consumer group,
// writes batches to MySQL and acknowledges them. Several processes may
// consume at once; each entry is persisted once whatever crashes, because
// persisting is idempotent and entries are acknowledged only afterwards.
type Consumer struct {
	client rueidis.Client
	db     Persister
	keys   layout.Keyspace
	cfg    Config
	log    *slog.Logger

	persisted, alreadyPresent, deadLettered, claimed, retries, batches, lost atomic.Uint64
	claimedDead, unknownVoucher, unreplicated                                atomic.Uint64
}

// New returns a Consumer that persists into db.
func New(client rueidis.Client, db Persister, cfg Config) *Consumer {
	cfg.Prefix = cmp.Or(cfg.Prefix, layout.DefaultPrefix)
	cfg.Group = cmp.Or(cfg.Group, layout.DefaultGroup)
	if cfg.Name == "" {
		cfg.Name = layout.InstanceName()
	}
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 500)
	cfg.Block = cmp.Or(cfg.Block, time.Second)
	cfg.Linger = cmp.Or(cfg.Linger, 20*time.Millisecond)
	cfg.ClaimIdle = cmp.Or(cfg.ClaimIdle, 30*time.Second)
	cfg.Heartbeat = cmp.Or(cfg.Heartbeat, 5*time.Second)
	cfg.MaxDeliveries = cmp.Or(cfg.MaxDeliveries, 5)
	cfg.Refresh = cmp.Or(cfg.Refresh, 2*time.Second)
	cfg.RetryMin = cmp.Or(cfg.RetryMin, 100*time.Millisecond)
	cfg.RetryMax = cmp.Or(cfg.RetryMax, 5*time.Second)
	cfg.PersistTimeout = cmp.Or(cfg.PersistTimeout, cfg.ClaimIdle/3)
	cfg.RetireAfter = cmp.Or(cfg.RetireAfter, time.Hour)
	cfg.ReplicaTimeout = cmp.Or(cfg.ReplicaTimeout, time.Second)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Consumer{client: client, db: db, keys: layout.New(cfg.Prefix), cfg: cfg,
		log: cfg.Logger.With("consumer", cfg.Name)}
}

// Name returns the consumer's name in the group.
func (c *Consumer) Name() string { return c.cfg.Name }

// Stats returns the consumer's counters.
func (c *Consumer) Stats() Stats {
	return Stats{
		Persisted: c.persisted.Load(), AlreadyPresent: c.alreadyPresent.Load(),
		DeadLettered: c.deadLettered.Load(), Claimed: c.claimed.Load(),
		Retries: c.retries.Load(), Batches: c.batches.Load(), Lost: c.lost.Load(),
		ClaimedDead: c.claimedDead.Load(), UnknownVoucher: c.unknownVoucher.Load(),
		Unreplicated: c.unreplicated.Load(),
	}
}

// Run consumes until ctx is done, then waits for the workers to stop and
// returns nil. Entries a worker holds when ctx ends stay pending on this
// consumer and are finished by the next Run with the same name, or taken
// over by another consumer within about a heartbeat (its heartbeat is
// deleted when Run returns). Run must not be called twice at once.
func (c *Consumer) Run(ctx context.Context) error {
	// The heartbeat starts before any read and is deleted after the
	// workers stop (defers run last to first).
	defer c.heartbeat(ctx)()
	workers := map[string]context.CancelFunc{} // registry member → its worker
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		for _, stop := range workers {
			stop()
		}
	}()
	tick := time.NewTicker(c.cfg.Refresh)
	defer tick.Stop()
	for {
		ids, err := c.registered(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("async: reading the voucher registry; keeping the current workers", "err", err)
		}
		if err == nil {
			for m, stop := range workers {
				if _, ok := ids[m]; !ok {
					stop()
					delete(workers, m)
				}
			}
			for m, id := range ids {
				if _, ok := workers[m]; !ok {
					wctx, stop := context.WithCancel(ctx)
					workers[m] = stop
					w := &worker{c: c, voucher: id, keys: c.keys.Tagged(m)}
					wg.Go(func() { w.run(wctx) })
				}
			}
		}
		if err := c.sweepRetiring(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("async: retiring finished sales", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// registered returns the members of the registry of vouchers, each
// with its voucher: a voucher's id, or a shard's tag.
func (c *Consumer) registered(ctx context.Context) (map[string]int64, error) {
	members, err := c.client.Do(ctx, c.client.B().Smembers().Key(c.keys.Registry()).Build()).AsStrSlice()
	if err != nil {
		return nil, err
	}
	ids := make(map[string]int64, len(members))
	for _, m := range members {
		id, _, ok := layout.ParseMember(m)
		if !ok {
			c.log.Error("async: ignoring a malformed voucher id in the registry", "member", m)
			continue
		}
		ids[m] = id
	}
	return ids, nil
}

// Backlog returns how many accepted orders are not persisted yet: entries
// of the registered vouchers' streams the group has not acknowledged (not
// delivered yet, or delivered and pending). Dead letters are not counted.
// It is what a readiness check watches.
func (c *Consumer) Backlog(ctx context.Context) (int64, error) {
	return layout.Backlog(ctx, c.client, c.keys, c.cfg.Group)
}

// isNoGroup reports whether err says the stream or its group is missing:
// the voucher is registered but not loaded (yet, or any more).
func isNoGroup(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(re.Error(), "NOGROUP")
}
