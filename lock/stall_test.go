package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// The stall tests make every blocking call with a 300ms context while its
// Redis is dead (SIGKILL) or stopped (SIGSTOP) and check that it returns
// soon after the context ends, with the context's error; then, once Redis
// is back (restarted or continued, running whatever scripts it had
// buffered), that another Client gets the lock within the lease and a
// margin: nothing the abandoned calls left behind wedges it.
const (
	stallCtx   = 300 * time.Millisecond
	stallSlack = 600 * time.Millisecond // 2 × replyGrace, and scheduling under -race
	stallLease = time.Second
)

// redisFault stops Redis (cause) and brings it back (heal). If gone, the
// caller's Client is closed before Redis comes back, as if its process had
// died: nothing cleans up after what its abandoned scripts did when Redis
// runs them, and that must expire.
type redisFault struct {
	name        string
	cause, heal func(*testenv.RedisServer)
	gone        bool
}

var redisFaults = []redisFault{
	{name: "killed", cause: (*testenv.RedisServer).Kill, heal: (*testenv.RedisServer).Start},
	{name: "stopped", cause: (*testenv.RedisServer).Pause, heal: (*testenv.RedisServer).Resume},
	{name: "stopped-caller-gone", cause: (*testenv.RedisServer).Pause, heal: (*testenv.RedisServer).Resume, gone: true},
}

// stallEnv is one stall case's private Redis and Clients on it.
type stallEnv struct {
	t      *testing.T
	s      *testenv.RedisServer
	prefix string
	c      *Client // makes the calls under test
	rc     rueidis.Client
	down   func() // causes the fault
}

// client returns another Client (another process) on e's Redis.
func (e *stallEnv) client() (*Client, rueidis.Client) {
	rc := e.s.Client(e.t)
	c := New(rc, WithPrefix(e.prefix), WithHandoffLease(500*time.Millisecond))
	e.t.Cleanup(func() { c.Close() })
	return c, rc
}

// stallCase is a call under test: run makes it with ctx, calling e.down
// first, or once its waiter is queued, and returns what to release once
// Redis is back (nil if nothing) and the call's error, which must be ctx's
// if the call waits.
type stallCase struct {
	name    string
	waits   bool
	run     func(e *stallEnv, ctx context.Context) (after func(context.Context) error, err error)
	acquire func(c *Client, ctx context.Context) (func(context.Context) error, error) // another Client's, once Redis is back
}

func TestCallsReturnWhenRedisStalls(t *testing.T) {
	cases := append(append(mutexStallCases(), rwStallCases()...), semStallCases()...)
	for _, f := range redisFaults {
		for _, tc := range cases {
			t.Run(f.name+"/"+tc.name, func(t *testing.T) { runStall(t, f, tc) })
		}
	}
}

func runStall(t *testing.T, f redisFault, tc stallCase) {
	s := testenv.StartRedis(t)
	e := &stallEnv{t: t, s: s, prefix: "stall:" + testenv.Unique() + ":"}
	e.c, e.rc = e.client()
	e.down = func() { f.cause(s) }
	ctx, cancel := context.WithTimeout(context.Background(), stallCtx)
	defer cancel()
	start := time.Now()
	after, err := tc.run(e, ctx)
	took := time.Since(start)
	f.cause(s) // if the case did not
	switch {
	case err == nil:
		t.Errorf("the call succeeded with Redis %s", f.name)
	case tc.waits && !errors.Is(err, context.DeadlineExceeded):
		t.Errorf("the call = %v, want the context's error", err)
	}
	if took > stallCtx+stallSlack {
		t.Errorf("the call returned %v after it started, its context ended after %v", took, stallCtx)
	}
	if f.gone {
		e.rc.Close()
	}
	f.heal(s)
	if after != nil {
		if err := after(timeout(t, 5*time.Second)); err != nil && !errors.Is(err, ErrNotHeld) && !f.gone {
			t.Errorf("releasing after Redis came back: %v", err)
		}
	}
	other, _ := e.client()
	start = time.Now()
	release, aerr := tc.acquire(other, timeout(t, stallLease+4*time.Second))
	if aerr != nil {
		t.Fatalf("another Client could not get the lock once Redis was back (after %v): %v", time.Since(start), aerr)
	}
	t.Logf("the call returned after %v (%v); another Client got the lock %v after Redis came back", took, err, time.Since(start))
	if err := release(context.Background()); err != nil {
		t.Errorf("releasing the other Client's lock: %v", err)
	}
}

func mutexStallCases() []stallCase {
	mutex := func(c *Client) *Mutex { return c.Mutex("m", WithWatchdog(stallLease)) }
	acquire := func(c *Client, ctx context.Context) (func(context.Context) error, error) {
		l, err := mutex(c).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	}
	held := func(e *stallEnv) *Lock { return mustLock(e.t, context.Background(), mutex(e.c)) }
	return []stallCase{
		{name: "Mutex.Lock", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			mustUnlock(e.t, held(e)) // connected: the script reaches the stopped Redis
			e.down()
			_, err := mutex(e.c).Lock(ctx)
			return nil, err
		}},
		{name: "Mutex.Lock/queued", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			h, rc := e.client()
			l := mustLock(e.t, context.Background(), mutex(h))
			got := make(chan error, 1)
			go func() { _, err := mutex(e.c).Lock(ctx); got <- err }()
			waitQueued(e.t, rc, mutex(e.c))
			e.down()
			return l.Unlock, <-got
		}},
		{name: "Mutex.TryLock", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			mustUnlock(e.t, held(e))
			e.down()
			_, err := mutex(e.c).TryLock(ctx)
			return nil, err
		}},
		{name: "Lock.Unlock", acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			l := held(e)
			e.down()
			return nil, l.Unlock(ctx) // the lease ends a hold whose release failed
		}},
		{name: "Lock.Extend", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			l := held(e)
			e.down()
			return l.Unlock, l.Extend(ctx, stallLease)
		}},
	}
}

func rwStallCases() []stallCase {
	rw := func(c *Client) *RWMutex { return c.RWMutex("rw", WithWatchdog(stallLease)) }
	acquire := func(c *Client, ctx context.Context) (func(context.Context) error, error) {
		l, err := rw(c).Lock(ctx)
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	}
	warm := func(e *stallEnv) { warmUp(e, acquire) }
	return []stallCase{
		{name: "RWMutex.Lock", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			warm(e)
			e.down()
			_, err := rw(e.c).Lock(ctx)
			return nil, err
		}},
		{name: "RWMutex.RLock", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			warm(e)
			e.down()
			_, err := rw(e.c).RLock(ctx)
			return nil, err
		}},
		{name: "RWMutex.Lock/queued", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			h, rc := e.client()
			r, err := rw(h).RLock(context.Background())
			if err != nil {
				e.t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() { _, err := rw(e.c).Lock(ctx); got <- err }()
			waitSharedQueued(e.t, rc, &rw(e.c).s, 1)
			e.down()
			return r.Unlock, <-got
		}},
		{name: "RWLock.Extend", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			l, err := rw(e.c).Lock(context.Background())
			if err != nil {
				e.t.Fatal(err)
			}
			e.down()
			return l.Unlock, l.Extend(ctx, stallLease)
		}},
	}
}

func semStallCases() []stallCase {
	sem := func(c *Client) *Semaphore { return c.Semaphore("sem", 1, WithWatchdog(stallLease)) }
	acquire := func(c *Client, ctx context.Context) (func(context.Context) error, error) {
		p, err := sem(c).Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return p.Release, nil
	}
	warm := func(e *stallEnv) { warmUp(e, acquire) }
	return []stallCase{
		{name: "Semaphore.Acquire", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			warm(e)
			e.down()
			_, err := sem(e.c).Acquire(ctx)
			return nil, err
		}},
		{name: "Semaphore.Acquire/queued", waits: true, acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			h, rc := e.client()
			p, err := sem(h).Acquire(context.Background())
			if err != nil {
				e.t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() { _, err := sem(e.c).Acquire(ctx); got <- err }()
			waitSharedQueued(e.t, rc, &sem(e.c).s, 1)
			e.down()
			return p.Release, <-got
		}},
		{name: "Permit.Release", acquire: acquire, run: func(e *stallEnv, ctx context.Context) (func(context.Context) error, error) {
			p, err := sem(e.c).Acquire(context.Background())
			if err != nil {
				e.t.Fatal(err)
			}
			e.down()
			return p.Release, p.Release(ctx)
		}},
	}
}

// warmUp takes and gives back once with acquire, so that e's client is
// connected when the fault comes: its script then reaches the stopped
// Redis.
func warmUp(e *stallEnv, acquire func(*Client, context.Context) (func(context.Context) error, error)) {
	release, err := acquire(e.c, context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := release(context.Background()); err != nil {
		e.t.Fatal(err)
	}
}

// TestQueuedWaitersReturnWithinTheBound queues waiters on a held Mutex, a
// write-held RWMutex and a full Semaphore, each checking every millisecond
// or two (WithFallback), and stops Redis before their contexts end, so
// that a check is in flight and the fallback timer due as each context
// ends. Each waiter must return within 2 × replyGrace of its context's
// end, as the package doc promises. Timers only add delay, so a call that
// waits one grace too many returns 3 × replyGrace after the end or later:
// the test fails from there, and leaves the time between to the scheduler
// (up to 70ms seen under -race, three copies at once, load 9 on 2 cores).
func TestQueuedWaitersReturnWithinTheBound(t *testing.T) {
	s := testenv.StartRedis(t)
	prefix := "bound:" + testenv.Unique() + ":"
	client := func() (*Client, rueidis.Client) {
		rc := s.Client(t)
		c := New(rc, WithPrefix(prefix), WithFallback(time.Millisecond, 2*time.Millisecond))
		t.Cleanup(func() { c.Close() })
		return c, rc
	}
	holder, rc := client()
	mustLock(t, context.Background(), holder.Mutex("m"))
	if _, err := holder.RWMutex("rw").Lock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Semaphore("sem", 1).Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}

	const perKind = 4
	deadline := time.Now().Add(time.Second)
	type result struct {
		call string
		late time.Duration // after the context's end
		err  error
	}
	results := make(chan result, 3*perKind)
	wait := func(call string, acquire func(context.Context) error) {
		go func() {
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			err := acquire(ctx)
			results <- result{call, time.Since(deadline), err}
		}()
	}
	for range perKind {
		c, _ := client() // a Client each: every Mutex waiter checks in Redis
		wait("Mutex.Lock", func(ctx context.Context) error { _, err := c.Mutex("m").Lock(ctx); return err })
		wait("RWMutex.RLock", func(ctx context.Context) error { _, err := c.RWMutex("rw").RLock(ctx); return err })
		wait("Semaphore.Acquire", func(ctx context.Context) error { _, err := c.Semaphore("sem", 1).Acquire(ctx); return err })
	}
	for queued(t, rc, holder.Mutex("m")) < perKind {
		time.Sleep(2 * time.Millisecond)
	}
	waitSharedQueued(t, rc, &holder.RWMutex("rw").s, perKind)
	waitSharedQueued(t, rc, &holder.Semaphore("sem", 1).s, perKind)
	s.Pause()
	t.Cleanup(s.Resume) // before the Clients close
	if time.Now().After(deadline.Add(-100 * time.Millisecond)) {
		t.Fatal("the waiters were queued too late: Redis stopped less than 100ms before their deadline")
	}
	for range 3 * perKind {
		r := <-results
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Errorf("%s = %v, want the context's error", r.call, r.err)
		}
		if r.late >= 3*replyGrace {
			t.Errorf("%s returned %v after its context ended, want at most %v", r.call, r.late, 2*replyGrace)
		}
		t.Logf("%s returned %v after its context ended", r.call, r.late)
	}
}
