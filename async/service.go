package async

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"golang.org/x/sync/singleflight"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/async/returns"
	"github.com/flashsale/flashsale/internal/groupcommit"
	"github.com/flashsale/flashsale/internal/vouchercache"
	"github.com/flashsale/flashsale/lifecycle"
)

var (
	_ flashsale.OrderService   = (*Service)(nil)
	_ flashsale.VoucherService = (*Service)(nil)
)

// Config configures a Service. OrderIDs is required.
type Config struct {
	// Prefix starts every Redis key (default DefaultPrefix); Group is the
	// consumer group of the order streams (default DefaultGroup). The
	// consumer and the reconciler must use the same.
	Prefix string
	Group  string
	// OrderIDs gives order and voucher ids. An order's id carries the
	// slot of the shard it is taken on (idgen.Slots), so gate.lua writes
	// its pointer with the shard's keys (layout.Pointer).
	OrderIDs SlotIDGenerator
	// VerdictTTL is how long an instance remembers that a voucher is sold
	// out, ended or not started (then never past the start Redis named)
	// and refuses orders for it without asking Redis (default 1s). Stock
	// given back by reconciliation is noticed after at most this.
	VerdictTTL time.Duration
	// MaxPending bounds the orders an instance has on their way through
	// the gate at once (default 2048): past it PlaceOrder answers EBusy
	// with a Retry-After at once, without queueing, so a saturated Redis
	// makes answers no slower than this many orders take (issue 34).
	MaxPending int
	// MaxGateWait bounds how long orders wait for a voucher's gate
	// (default 40ms): an order that would wait longer, its own call
	// included, behind the batches queued and in flight, at the pace
	// orders waited lately, is answered EBusy with a Retry-After at once,
	// without queueing; one full batch may always wait. MaxPending bounds
	// the count of orders in flight; this bounds their wait, whatever
	// Redis's speed (issue 34: p99 ≤ 100 ms under overload).
	MaxGateWait time.Duration
	// ShardLinger bounds how long a shard's gate batch waits to fill
	// (default DefaultShardLinger; negative: never): each gate call costs
	// Redis a fixed part besides its orders' (the round trip, the
	// script's call), and a voucher of K shards splits its orders into K
	// batches 1/K as large, so without it K shards cost Redis more per
	// order than one (issue 34). A shard's queue lingers only after a
	// call, while the orders queued meanwhile are fewer than K times
	// their count (what the voucher's one queue would have sent; at most
	// shardFill): under a steady stream of orders, never for a lone
	// order. Vouchers without shards never linger.
	ShardLinger time.Duration
	// PointerTTL is how long an accepted order can be found by id before
	// the consumer persists it (default 24h).
	PointerTTL time.Duration
	// Logger gets what goes wrong off the request path (default
	// slog.Default()).
	Logger *slog.Logger
	// Durability is when an order is accepted (default: in Redis's
	// memory); check it against Redis with CheckDurability at start.
	Durability DurabilityConfig
	// Lifecycle cancels and pays orders (default: one on the store with
	// Returns, the Restocker into this gate's stock). Serve passes the one
	// whose expirer it runs.
	Lifecycle *lifecycle.Service
}

// Service takes orders through the Redis gate and creates and finds
// vouchers: it implements flashsale.OrderService and
// flashsale.VoucherService. Orders it accepts are pending until a consumer
// (async/consume) persists them. It is safe for concurrent use.
type Service struct {
	client rueidis.Client
	db     VoucherStore
	keys   layout.Keyspace
	cfg    Config
	log    *slog.Logger
	// epoch is what WatchEpoch remembers of Redis's epoch.
	epoch epochState

	// locals holds, per voucher that exists, its gate keys and the
	// instance's remembered verdict.
	locals sync.Map // int64 → *local
	// rows caches each voucher's row; the stock figures come from Redis.
	rows  *vouchercache.Cache
	loads singleflight.Group
	// gates holds, per voucher, the orders waiting for a batch of the
	// gate (gatebatch.go).
	gates groupcommit.Map[string, *gateCall] // by meta key
	// gatePace is how long orders waited for the gate lately, queued to
	// answered, per batch they waited for, in ns (gateQueue.paced).
	// gateQueue.admit estimates an order's wait from it.
	gatePace atomic.Int64
	// pending counts the orders between the bound (Config.MaxPending) and
	// their answer.
	pending atomic.Int64
	life    *lifecycle.Service
}

// NewService returns a Service on the Redis client and the store.
func NewService(client rueidis.Client, db VoucherStore, cfg Config) (*Service, error) {
	if client == nil || db == nil || cfg.OrderIDs == nil {
		return nil, errors.New("async: a Redis client, a store and an order ID generator are required")
	}
	cfg.Prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	cfg.Group = cmp.Or(cfg.Group, DefaultGroup)
	cfg.VerdictTTL = cmp.Or(cfg.VerdictTTL, time.Second)
	cfg.PointerTTL = cmp.Or(cfg.PointerTTL, 24*time.Hour)
	cfg.MaxPending = cmp.Or(cfg.MaxPending, defaultMaxPending)
	cfg.MaxGateWait = cmp.Or(cfg.MaxGateWait, defaultMaxGateWait)
	cfg.ShardLinger = cmp.Or(cfg.ShardLinger, DefaultShardLinger)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Durability = cfg.Durability.withDefaults()
	if _, err := ParseDurability(string(cfg.Durability.Mode)); err != nil {
		return nil, err
	}
	if cfg.Lifecycle == nil {
		cfg.Lifecycle = lifecycle.New(db, lifecycle.Config{Restocker: Returns(client, cfg), Logger: cfg.Logger})
	}
	return &Service{client: client, db: db, keys: layout.New(cfg.Prefix), cfg: cfg, log: cfg.Logger, life: cfg.Lifecycle,
		rows: vouchercache.New(db.Voucher, 0)}, nil
}

// Returns returns the Restocker that puts closed orders' units back into
// the stock of the gate configured by cfg, as durably as it accepts
// orders.
func Returns(client rueidis.Client, cfg Config) *returns.Restocker {
	rc := returns.Config{Prefix: cfg.Prefix}
	if d := cfg.Durability.withDefaults(); d.Mode == DurabilityReplica {
		rc.MinReplicas, rc.ReplicaTimeout = d.MinReplicas, d.ReplicaTimeout
	}
	return returns.New(client, rc)
}

// local is what an instance keeps about one voucher.
type local struct {
	gateKeys []string // meta, buyers, orders, keyed (VoucherKeys.Gate)
	slot     int      // the slot of gateKeys
	// shards holds the keys of a sharded voucher's shards (shard.go); nil
	// when it has one.
	shards  []layout.VoucherKeys
	syncKey string
	verdict atomic.Pointer[verdict]
	// notices counts the return notices heard for the voucher
	// (forgetSoldOut): a sold-out reply to a call sent before one is not
	// remembered.
	notices atomic.Int64

	// accepted counts the orders the gate accepted here since WatchEpoch
	// last found Redis whole.
	accepted atomic.Int64
	// levels holds, per shard (one for a voucher with one shard), the
	// lowest level the gate reported here in the shard's history, or nil;
	// see rewind.go.
	levels []atomic.Pointer[levelMark]
}

// verdict is a refusal remembered until a deadline.
type verdict struct {
	code  string
	until time.Time
	start time.Time // ENotStarted: when the sale starts, by this instance's clock
}

// newLocal returns the local state of a voucher.
func newLocal(k layout.Keyspace, voucherID int64) *local {
	vk := k.Voucher(voucherID)
	return &local{gateKeys: vk.Gate(), syncKey: vk.Sync, slot: vk.Slot, levels: newLevels(1)}
}

// remember makes the instance refuse orders with code for ttl; for
// ENotStarted, startsIn is how long until the sale starts.
func (l *local) remember(code string, ttl, startsIn time.Duration) {
	now := time.Now()
	l.verdict.Store(&verdict{code: code, until: now.Add(ttl), start: now.Add(startsIn)})
}

// rememberSoldOut remembers a sell-out for ttl unless a return notice
// came since the count of them was notices.
func (l *local) rememberSoldOut(ttl time.Duration, notices int64) {
	l.remember(flashsale.ESoldOut, ttl, 0)
	if l.notices.Load() != notices { // a notice came: forget it again
		l.verdict.Store(nil)
	}
}

// refusal returns the remembered refusal, or nil when there is none.
func (l *local) refusal() error {
	v := l.verdict.Load()
	if v == nil {
		return nil
	}
	now := time.Now()
	if !now.Before(v.until) {
		return nil
	}
	return refusal(v.code, v.start.Sub(now))
}

// refusal returns the error for a refusal the gate answered, or the
// instance remembers: ENotStarted with retryAfter, EEnded or ESoldOut.
// After a sell-out nearly every answer is one, so the messages are
// constants, not formatted.
func refusal(code string, retryAfter time.Duration) error {
	switch code {
	case flashsale.ENotStarted:
		return &flashsale.Error{Code: code, Message: "the sale has not started", RetryAfter: retryAfter}
	case flashsale.EEnded:
		return &flashsale.Error{Code: code, Message: "the sale has ended"}
	}
	return &flashsale.Error{Code: flashsale.ESoldOut, Message: "sold out"}
}

// local returns the state of a voucher, and whether it is kept: only
// vouchers the gate has found are, so requests for made-up ids do not grow
// the map.
func (s *Service) local(voucherID int64) (*local, bool) {
	if l, ok := s.locals.Load(voucherID); ok {
		return l.(*local), true
	}
	return newLocal(s.keys, voucherID), false
}

// keep records the state of a voucher the gate has found. When another
// request kept one first, the orders l counted move to it.
func (s *Service) keep(voucherID int64, l *local) {
	if prev, loaded := s.locals.LoadOrStore(voucherID, l); loaded {
		prev.(*local).accepted.Add(l.accepted.Swap(0))
	}
}

// unavailable wraps a Redis error as EUnavailable: the caller may retry
// (after a hint when Redis is full).
func unavailable(op string, err error) error {
	return fmt.Errorf("async: %s: %w: %w", op, redisUnavailable(err), err)
}
