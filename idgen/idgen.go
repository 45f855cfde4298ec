// Package idgen hands out globally unique, increasing 64-bit order IDs:
// 31 bits of seconds since an epoch and a 32-bit sequence number within the
// second (New), or, slotted (Slots, WithSlot), a flag bit, the 31 bits of
// seconds, a 17-bit sequence number and the 14-bit Redis Cluster slot the
// ID was taken for: an ID then tells which slot its order's keys are in,
// and each slot's IDs come from a hash in that slot, so no one key is hot
// (see id.go for the layouts; Slots' IDs are unique and increase per
// slot, and every slotted ID is above every plain one).
//
// Rather than INCR a Redis counter once per ID, a Generator
// takes sequence numbers from Redis in ranges (one round trip per batch,
// 1000 by default) and fetches the next range in the background when half
// of the current one is used, so NextID does not wait for Redis in the
// steady state. The second of an ID is the second, by Redis's clock, in
// which its range was allocated, not the moment NextID returned it.
//
// All Generators sharing a name (and slot) share one Redis hash,
// "<prefix>{<name>}" (slotted: "<prefix>{<tag of the slot>}:<name>"),
// holding the second and the next sequence number. Ranges come out of it in
// strictly increasing order, so IDs are unique across processes and
// increase within each process. The hash is safe to lose (Redis restart,
// eviction, FLUSHALL): a range is never allocated in a second later than
// Redis's clock, and a lost hash is recreated one second past both the
// clock and a floor (the caller's last ID and, with WithFloor, the largest
// ID the system of record holds), so nothing allocated before the loss can
// be allocated again. The price: after a loss, and on the first use of a
// name (for Slots: of a slot), the new hash allocates nothing until the
// clock reaches its second (under a second's wait, which the local ranges
// usually absorb). A slotted hash restarts past the whole second of the
// floor ID, whose sequence number (another slot's) says nothing of its
// own; a slot's second holds 2^17 IDs, and a hash that used them up waits
// for the next second.
//
// Two holes remain. Redis's clock going back across a loss: ranges that
// other processes hold unused, in seconds past the new clock and the floor,
// can be allocated again. And a stale hash (an asynchronous replica
// promoted before it had the last writes) is only safe once the new
// master's clock has passed the last second allocated on the old one; a
// failover detected by Sentinel or Cluster takes seconds, a forced manual
// one may not. Each process also passes its own last position, so it never
// goes backwards itself. A Redis clock that goes back without a loss only
// delays allocation until it catches up, as with Snowflake.
package idgen

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/hashslot"
	"github.com/redis/rueidis"
)

var _ flashsale.IDGenerator = (*Generator)(nil)

// Default settings.
const (
	DefaultBatch  = 1000
	DefaultPrefix = "idgen:"
	// maxBatch is the size of one second's sequence space.
	maxBatch = 1 << seqBits
)

// FloorFunc returns the largest ID known to be in use outside Redis, for
// instance SELECT MAX(id) FROM orders, or 0 if there is none.
type FloorFunc func(ctx context.Context) (int64, error)

// Option configures a Generator.
type Option func(*Generator)

// WithPrefix sets the prefix of the Redis key (default "idgen:").
func WithPrefix(prefix string) Option {
	return func(g *Generator) { g.prefix = prefix }
}

// WithBatch sets how many sequence numbers one round trip fetches (default
// 1000, clamped to [1, 2^32]). A larger batch means fewer round trips and
// larger gaps: a process that stops leaves the rest of its ranges unused.
func WithBatch(n int64) Option {
	return func(g *Generator) { g.batch = min(max(n, 1), maxBatch) }
}

// WithSlot makes the Generator hand out slotted IDs carrying slot (0 ≤
// slot < 16384, a Redis Cluster hash slot; see Slot): its hash is then
// "<prefix>{<tag>}:<name>", in that slot, and a second holds 2^17 IDs.
// Slots keeps one such Generator per slot.
func WithSlot(slot int) Option {
	return func(g *Generator) { g.slot = slot & slotMask; g.slotted = true }
}

// WithEpoch sets the epoch the 31 bits of seconds count from (default
// 2026-01-01 UTC), truncated to a whole second. Every Generator sharing a
// name must use the same epoch.
func WithEpoch(t time.Time) Option {
	return func(g *Generator) { g.epoch = t.Truncate(time.Second) }
}

// WithFloor sets the function consulted, only, when the Redis hash is
// missing: the hash restarts in a second past the ID it returns, so IDs
// already stored elsewhere are never reissued even if Redis's clock went
// back. Should the floor be ahead of Redis's clock, no range is allocated
// until the clock catches up.
func WithFloor(fn FloorFunc) Option {
	return func(g *Generator) { g.floorFn = fn }
}

// WithLogger sets the logger for restarts of the hash and for lost and
// regained contact with Redis (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(g *Generator) { g.log = l }
}

// Stats are a Generator's counters since New.
type Stats struct {
	// IDs is the number of IDs NextID returned.
	IDs uint64
	// RoundTrips is the number of allocation scripts run against Redis,
	// including failed ones and those that allocated nothing.
	RoundTrips uint64
	// Resets is the number of times this Generator found the Redis hash
	// missing and recreated it.
	Resets uint64
	// Failures is the number of range fetches that failed.
	Failures uint64
	// Waits is the number of NextID calls that found both ranges used up
	// and had to wait for Redis; in the steady state only the first does.
	Waits uint64
}

// Generator hands out IDs from ranges it allocates in Redis. It is safe for
// concurrent use.
type Generator struct {
	client  rueidis.Client
	key     string
	prefix  string
	batch   int64
	low     int64 // refill when this many IDs or fewer are left
	epoch   time.Time
	floorFn FloorFunc
	log     *slog.Logger
	slotted bool  // WithSlot: the IDs carry slot
	slot    int   // the slot of a slotted Generator
	seqMax  int64 // the sequence numbers of one second

	ctx    context.Context // cancelled by Close; background fetches run in it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	cur      span          // the range NextID takes from
	next     span          // the range fetched ahead
	fetching bool          // a fetch is in flight
	done     chan struct{} // closed when the fetch in flight ends
	end      position      // where this process's last range ended
	err      error         // why the last fetch failed, nil if it did not
	retryAt  time.Time     // no new fetch before this after a failure
	backoff  time.Duration
	issued   uint64
	waits    uint64

	roundTrips, resets, failures atomic.Uint64
}

// span is a range [lo, hi) of IDs, one every 1<<shift (a slotted
// Generator's IDs of one second differ by 1<<slotBits).
type span struct {
	lo, hi int64
	shift  uint
}

func (s span) len() int64 { return (s.hi - s.lo) >> s.shift }

// New returns a Generator of IDs for name (for example "order"), backed by
// the Redis hash "<prefix>{<name>}". It does not talk to Redis until the
// first NextID.
func New(c rueidis.Client, name string, opts ...Option) *Generator {
	g := &Generator{
		client: c,
		prefix: DefaultPrefix,
		batch:  DefaultBatch,
		epoch:  DefaultEpoch,
		log:    slog.Default(),
	}
	for _, opt := range opts {
		opt(g)
	}
	g.key, g.seqMax = g.prefix+"{"+name+"}", maxBatch
	if g.slotted {
		g.key, g.seqMax = g.prefix+"{"+hashslot.Tag(g.slot)+"}:"+name, 1<<slottedSeqBits
		g.batch = min(g.batch, g.seqMax)
	}
	g.low = g.batch / 2
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

// NextID returns the next ID. It waits for Redis only when the current and
// the prefetched range are both used up; if Redis fails then, it returns an
// error wrapping ErrUnavailable and the cause, and tries Redis again on a
// later call (after a short backoff).
func (g *Generator) NextID(ctx context.Context) (int64, error) {
	g.mu.Lock()
	for {
		if g.closed {
			g.mu.Unlock()
			return 0, ErrClosed
		}
		if g.cur.len() <= 0 {
			g.cur, g.next = g.next, span{}
		}
		if g.cur.len() > 0 {
			id := g.cur.lo
			g.cur.lo += 1 << g.cur.shift
			g.issued++
			if g.cur.len() <= g.low && g.next.len() <= 0 && !g.fetching && g.mayFetch() {
				g.startFetch()
			}
			g.mu.Unlock()
			return id, nil
		}
		if !g.fetching {
			if !g.mayFetch() {
				err := g.err
				g.mu.Unlock()
				return 0, err
			}
			g.startFetch()
		}
		g.waits++
		done := g.done
		g.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return 0, fmt.Errorf("idgen: waiting for a range: %w", ctx.Err())
		}
		g.mu.Lock()
		if g.cur.len() <= 0 && g.next.len() <= 0 && !g.fetching && g.err != nil && !g.closed {
			// The fetch we waited for failed: report it rather than retry
			// at once, so callers fail fast while Redis is down.
			err := g.err
			g.mu.Unlock()
			return 0, err
		}
	}
}

// mayFetch reports whether a fetch may start: always, unless the last one
// failed less than a backoff ago. g.mu must be held.
func (g *Generator) mayFetch() bool {
	return g.err == nil || !time.Now().Before(g.retryAt)
}

// startFetch starts fetching a range in the background. g.mu must be held.
func (g *Generator) startFetch() {
	g.fetching = true
	g.done = make(chan struct{})
	g.wg.Add(1)
	go g.runFetch(g.end, g.done)
}

// Backoff after failed fetches.
const (
	minBackoff = 10 * time.Millisecond
	maxBackoff = time.Second
)

// runFetch fetches a range starting at or after floor and installs it.
func (g *Generator) runFetch(floor position, done chan struct{}) {
	defer g.wg.Done()
	defer close(done)
	s, err := g.fetch(g.ctx, floor)

	g.mu.Lock()
	defer g.mu.Unlock()
	g.fetching = false
	if err != nil {
		g.failures.Add(1)
		if g.err == nil && !g.closed {
			g.log.Warn("idgen: cannot allocate ids", "key", g.key, "err", err)
		}
		g.err = err
		g.backoff = min(max(2*g.backoff, minBackoff), maxBackoff)
		g.retryAt = time.Now().Add(g.backoff)
		return
	}
	if g.err != nil {
		g.log.Info("idgen: allocating ids again", "key", g.key)
	}
	g.err, g.backoff = nil, 0
	g.end = g.past(s.hi - 1<<s.shift)
	if g.cur.len() <= 0 {
		g.cur = s
	} else {
		g.next = s
	}
}

// Close stops background fetches and waits for them to end. NextID returns
// ErrClosed afterwards. The unused rest of the ranges is never handed out.
func (g *Generator) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	g.wg.Wait()
}

// Stats returns the Generator's counters.
func (g *Generator) Stats() Stats {
	g.mu.Lock()
	issued, waits := g.issued, g.waits
	g.mu.Unlock()
	return Stats{
		IDs:        issued,
		Waits:      waits,
		RoundTrips: g.roundTrips.Load(),
		Resets:     g.resets.Load(),
		Failures:   g.failures.Load(),
	}
}

// Epoch returns the epoch the Generator's IDs count their seconds from.
func (g *Generator) Epoch() time.Time { return g.epoch }
