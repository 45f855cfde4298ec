package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// ErrPermits is returned for a number of permits below 1.
var ErrPermits = errors.New("lock: a semaphore needs at least 1 permit")

// Semaphore is a named distributed counting semaphore: at most its number
// of permits are held at once, each by a Permit with its own owner token,
// lease and watchdog, Lost and Context. The number lives in Redis: the
// first acquisition of a name sets it to the one the Semaphore was made
// with, SetPermits changes it. Get one from Client.Semaphore; it is safe
// for concurrent use.
type Semaphore struct{ s sharedLock }

// Permit is one acquired permit of a Semaphore. It is safe for concurrent
// use.
type Permit struct{ *hold }

// Semaphore returns the semaphore called name, which starts with permits
// permits if Redis has no number for it yet.
func (c *Client) Semaphore(name string, permits int, opts ...MutexOption) *Semaphore {
	return &Semaphore{s: c.newShared(name, "sem", permits, opts)}
}

// Name returns the name of the semaphore.
func (s *Semaphore) Name() string { return s.s.name }

// Acquire obtains a permit, waiting until one is free and the waiters
// queued before the caller have theirs, or until ctx is done (then it
// returns ctx.Err(), within 200ms of its end whatever Redis does, as
// Mutex.Lock).
func (s *Semaphore) Acquire(ctx context.Context) (*Permit, error) { return s.acquire(ctx, true) }

// TryAcquire makes one attempt to obtain a permit and returns
// ErrNotObtained at once if none is free or waiters are queued.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Permit, error) {
	return s.acquire(ctx, false)
}

func (s *Semaphore) acquire(ctx context.Context, wait bool) (*Permit, error) {
	if n, _ := strconv.Atoi(s.s.permits); n < 1 {
		return nil, fmt.Errorf("%w: semaphore %q made with %d", ErrPermits, s.s.name, n)
	}
	h, err := s.s.acquire(ctx, sharedHold, wait)
	if err != nil {
		return nil, err
	}
	return &Permit{h}, nil
}

// SetPermits sets the number of permits to n (at least 1) and lets in the
// waiters that now fit. Lowering it takes no permit back: holders beyond
// n keep theirs, and nobody new gets one until fewer than n are held.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	if n < 1 {
		return fmt.Errorf("%w: SetPermits(%d) on semaphore %q", ErrPermits, n, s.s.name)
	}
	args := []string{"", s.s.settings, s.s.leaseArg, sharedHold, "0", strconv.Itoa(n)}
	sctx, cancel := s.s.client.sendContext(ctx)
	defer cancel()
	if err := execScript(sctx, sharedPermitsScript, s.s.client, s.s.keys, args).Error(); err != nil {
		return opError(ctx, "set permits", s.s.name, err)
	}
	return nil
}

// Permits returns the number of permits in Redis, or the number the
// Semaphore was made with if Redis has none yet.
func (s *Semaphore) Permits(ctx context.Context) (int, error) {
	c := s.s.client
	n, err := do(ctx, c, c.rc.B().Get().Key(s.s.keys[5]).Build()).AsInt64()
	switch {
	case rueidis.IsRedisNil(err):
		return strconv.Atoi(s.s.permits)
	case err != nil:
		return 0, opError(ctx, "permits", s.s.name, err)
	}
	return int(n), nil
}

// Release gives the permit back and lets the next waiter in. It returns
// ErrNotHeld if the permit was lost or released already. If Redis cannot
// be reached it returns an error and the permit stays held and renewed:
// call Release again (it returns nil if the failed call had released it
// after all).
func (p *Permit) Release(ctx context.Context) error { return p.release(ctx) }
