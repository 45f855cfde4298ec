package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/internal/redispin"
	"github.com/redis/rueidis"
)

// Errors returned by the package; check them with errors.Is.
var (
	// ErrNotObtained is returned by TryLock when another holder has the lock.
	ErrNotObtained = errors.New("lock: not obtained")
	// ErrNotHeld is returned when the caller's lock expired or was taken over:
	// Unlock, Extend and Reenter never touch another holder's lock.
	ErrNotHeld = errors.New("lock: not held")
	// ErrLost is the cause (context.Cause) of a Lock's Context when the lock
	// was lost while held: a renewal found it gone or could not reach Redis
	// before the lease ran out.
	ErrLost = errors.New("lock: lost")
	// ErrClosed is returned by a Client after Close.
	ErrClosed = errors.New("lock: client closed")
)

// Client hands out Mutexes that share one Redis client and one pub/sub
// subscription: every waiter of this Client is woken through it, however
// many there are. Create one per process (or per Redis deployment) and keep
// it; it is safe for concurrent use.
type Client struct {
	rc            rueidis.Client
	cfg           config
	id            string // embedded in every token: "<id>:<random>"
	channelPrefix string // prefix + "ch:"; a client listens on channelPrefix + id

	mu      sync.Mutex
	waiters map[string]*waiter // token → waiter blocked in Lock
	lines   map[string]*line   // lock key → this client's waiters and holder
	spare   []*line            // empty lines for reuse
	closed  bool

	stats     stats                    // stats.go; atomic, outside mu
	health    health                   // direct.go; atomic, outside mu
	lastGrace atomic.Pointer[graceCtx] // grace.go: the graceCtx made last

	// defaults is what Mutex starts from, with its script arguments.
	defaults struct {
		cfg                                 mutexConfig
		leaseArg, settingsArg, retentionArg string
	}

	ctx     context.Context // cancelled by Close
	cancel  context.CancelFunc
	stopped chan struct{} // closed when the subscriber has exited
}

type config struct {
	prefix       string
	fallbackMin  time.Duration
	fallbackMax  time.Duration
	handoffLease time.Duration
	queueTTL     time.Duration
	turn         time.Duration
}

// Option configures a Client.
type Option func(*config)

// WithPrefix sets the prefix of every key and channel the client uses
// (default "lock:"). The keys of lock N are <prefix>{N}, <prefix>{N}:q and
// <prefix>{N}:f; if N is empty or holds a brace, {N} is replaced by
// {#<digest of N>}~N, so that the hash tag stays whole. The prefix must not
// contain '{' or '}', which would change the Redis Cluster hash tag; New
// panics if it does.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithFallback sets the range of the jittered interval after which a queued
// waiter checks the lock by itself in case its wake-up push was lost
// (default 100ms to 300ms). A wait queue nobody has checked for five times
// max (at least 1s) expires, so the waiters of dead processes do not stay.
func WithFallback(min, max time.Duration) Option {
	return func(c *config) { c.fallbackMin, c.fallbackMax = min, max }
}

// WithHandoffLease bounds the lease a lock is handed to a waiter with
// (default 2s); the new holder extends it to its own lease at its first
// renewal, a third of the way through. A waiter whose process died cannot
// refuse a handoff, so this is how long it can hold up the others: once per
// lock, since a Client queues only one waiter per lock in Redis.
func WithHandoffLease(d time.Duration) Option { return func(c *config) { c.handoffLease = d } }

// WithTurnDuration bounds a turn: how long this Client may keep passing a
// lock among its own goroutines, without Redis, while other Clients wait
// for it (default 2ms). A turn also ends once it has served the goroutines
// that were waiting when it began. A hold that outlasts d ends the turn at
// its release; d <= 0 makes every handoff go through Redis.
func WithTurnDuration(d time.Duration) Option { return func(c *config) { c.turn = d } }

// New returns a Client that uses rc and starts its subscriber, which holds
// one dedicated connection of rc. Close stops it.
func New(rc rueidis.Client, opts ...Option) *Client {
	cfg := config{
		prefix:       "lock:",
		fallbackMin:  100 * time.Millisecond,
		fallbackMax:  300 * time.Millisecond,
		handoffLease: 2 * time.Second,
		turn:         2 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if strings.ContainsAny(cfg.prefix, "{}") {
		panic("lock: prefix " + strconv.Quote(cfg.prefix) + " contains a brace")
	}
	cfg.fallbackMin = max(cfg.fallbackMin, time.Millisecond)
	cfg.fallbackMax = max(cfg.fallbackMax, cfg.fallbackMin)
	cfg.handoffLease = max(cfg.handoffLease, 10*time.Millisecond)
	cfg.queueTTL = max(5*cfg.fallbackMax, time.Second)

	c := &Client{
		rc:            redispin.Wrap(rc),
		cfg:           cfg,
		id:            newClientID(),
		channelPrefix: cfg.prefix + "ch:",
		waiters:       make(map[string]*waiter),
		lines:         make(map[string]*line),
		spare:         make([]*line, 0, 64),
		stopped:       make(chan struct{}),
	}
	c.health.off = rc.Mode() == rueidis.ClientModeCluster
	c.health.epoch = time.Now()
	c.defaults.cfg = mutexConfig{lease: 10 * time.Second, watchdog: true, fenceRetention: 24 * time.Hour}
	c.defaults.leaseArg = ms(c.defaults.cfg.lease)
	c.defaults.settingsArg = c.settingsArg(c.defaults.cfg.fenceRetention)
	c.defaults.retentionArg = ms(c.defaults.cfg.fenceRetention)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.subscribe()
	return c
}

// Close stops the subscriber. Waiters blocked in Lock leave the queue and
// return ErrClosed, and later Lock and TryLock calls return ErrClosed. Locks
// already held are not released: Unlock them (their renewal goes on until
// then). Close does not close the rueidis client.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	<-c.stopped
	return nil
}

// Mutex returns the lock called name. Mutexes are cheap, hold no state in
// Redis until locked, and any number of them (in any process) with the same
// name and prefix are the same lock.
func (c *Client) Mutex(name string, opts ...MutexOption) *Mutex {
	cfg := c.defaults.cfg
	for _, o := range opts {
		o(&cfg)
	}
	cfg.lease = max(cfg.lease, 3*time.Millisecond)
	cfg.fenceRetention = max(cfg.fenceRetention, time.Second)
	m := &Mutex{
		client:       c,
		name:         name,
		cfg:          cfg,
		keyList:      lockKeys(c.cfg.prefix, name),
		leaseArg:     c.defaults.leaseArg,
		settingsArg:  c.defaults.settingsArg,
		retentionArg: c.defaults.retentionArg,
	}
	if cfg.lease != c.defaults.cfg.lease {
		m.leaseArg = ms(cfg.lease)
	}
	if cfg.fenceRetention != c.defaults.cfg.fenceRetention {
		m.settingsArg = c.settingsArg(cfg.fenceRetention)
		m.retentionArg = ms(cfg.fenceRetention)
	}
	return m
}

// settingsArg returns the settings argument of the queue scripts.
func (c *Client) settingsArg(fenceRetention time.Duration) string {
	return ms(c.cfg.handoffLease) + ":" + ms(fenceRetention) + ":" + ms(c.cfg.queueTTL) + ":" + c.channelPrefix
}

// lockKey returns the key of lock name: prefix{name}. A name that is empty
// or holds a brace would make the Redis Cluster hash tag empty or cut it
// short, so it goes after a tag made of its digest instead:
// prefix{#<fnv-64a hex>}~name. Keys of the two forms never collide: only
// the second has anything after its closing brace.
func lockKey(prefix, name string) string {
	if name != "" && !strings.ContainsAny(name, "{}") {
		return prefix + "{" + name + "}"
	}
	return prefix + "{#" + strconv.FormatUint(fnv64a(name), 16) + "}~" + name
}

// lockKeys returns the keys of lock name: its hash, queue and fence keys,
// cut from one string (a Mutex is often made for one Lock call).
func lockKeys(prefix, name string) [3]string {
	base := lockKey(prefix, name)
	all := base + base + ":q" + base + ":f"
	n := len(base)
	return [3]string{all[:n], all[n : 2*n+2], all[2*n+2:]}
}

func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// newClientID returns 16 random hex digits from the system's CSPRNG.
func newClientID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// newToken returns a fresh owner token "<client id>:<64 random bits>".
// math/rand/v2's global source is a per-thread ChaCha8 seeded by the
// runtime: unpredictable, and no syscall on the hot path.
func (c *Client) newToken() string {
	var b [16 + 1 + 16]byte
	n := copy(b[:], c.id)
	buf := append(b[:n], ':')
	buf = strconv.AppendUint(buf, mrand.Uint64(), 16)
	return string(buf)
}

// fallback returns a jittered delay in [fallbackMin, fallbackMax].
func (c *Client) fallback() time.Duration {
	span := c.cfg.fallbackMax - c.cfg.fallbackMin
	if span <= 0 {
		return c.cfg.fallbackMin
	}
	return c.cfg.fallbackMin + time.Duration(mrand.Int64N(int64(span)+1))
}
