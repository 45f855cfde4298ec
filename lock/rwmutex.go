package lock

import (
	"context"
	"errors"
)

// ErrUpgrade is returned by RWMutex.Lock and TryLock when their context
// carries a held read lock of the same RWMutex: waiting for the write lock
// while holding the read lock would wait forever.
var ErrUpgrade = errors.New("lock: write lock asked for under a read lock of the same RWMutex")

// RWMutex is a named distributed readers-writer lock: many readers or one
// writer. Each acquisition (RWLock) has its own owner token, lease and
// watchdog, Lost and Context, as a Mutex's Lock; write locks are fenced.
// Get one from Client.RWMutex; it is safe for concurrent use and holds no
// state in Redis until locked.
type RWMutex struct{ s sharedLock }

// RWLock is one acquisition of an RWMutex, read or write: the handle its
// holder releases, extends and re-enters it through. It is safe for
// concurrent use.
type RWLock struct{ *hold }

// RWMutex returns the readers-writer lock called name. Any number of them
// (in any process) with the same name and prefix are the same lock.
func (c *Client) RWMutex(name string, opts ...MutexOption) *RWMutex {
	return &RWMutex{s: c.newShared(name, "rw", 0, opts)}
}

// Name returns the name of the lock.
func (rw *RWMutex) Name() string { return rw.s.name }

// RLock obtains a read lock, waiting until no writer holds the lock or
// waits ahead of the caller, or until ctx is done (then it returns
// ctx.Err(), within 200ms of its end whatever Redis does, as Mutex.Lock).
// If ctx carries a held RWLock of this lock, read or write (see
// RWLock.Context), RLock re-enters it and returns the same handle.
func (rw *RWMutex) RLock(ctx context.Context) (*RWLock, error) {
	return rw.lock(ctx, sharedHold, true)
}

// TryRLock makes one attempt at a read lock and returns ErrNotObtained if a
// writer holds the lock or anyone is queued for it.
func (rw *RWMutex) TryRLock(ctx context.Context) (*RWLock, error) {
	return rw.lock(ctx, sharedHold, false)
}

// Lock obtains the write lock, waiting until nobody holds the lock and the
// waiters queued before the caller have had their turn, or until ctx is
// done (as RLock). If ctx carries the held write lock, Lock re-enters it;
// if it carries a held read lock of this RWMutex, Lock returns ErrUpgrade.
func (rw *RWMutex) Lock(ctx context.Context) (*RWLock, error) {
	return rw.lock(ctx, exclusiveHold, true)
}

// TryLock makes one attempt at the write lock and returns ErrNotObtained if
// anyone holds the lock or is queued for it.
func (rw *RWMutex) TryLock(ctx context.Context) (*RWLock, error) {
	return rw.lock(ctx, exclusiveHold, false)
}

func (rw *RWMutex) lock(ctx context.Context, kind string, wait bool) (*RWLock, error) {
	if h := rw.s.heldIn(ctx); h != nil {
		if kind == exclusiveHold && h.kind == sharedHold {
			return nil, ErrUpgrade
		}
		if err := h.reenter(ctx); err != nil {
			return nil, err
		}
		return h.rw, nil
	}
	h, err := rw.s.acquire(ctx, kind, wait)
	if err != nil {
		return nil, err
	}
	h.rw = &RWLock{h}
	return h.rw, nil
}

// Writer reports whether this is the write lock.
func (l *RWLock) Writer() bool { return l.kind == exclusiveHold }

// Fence returns the fencing token of a write lock: tokens of one RWMutex
// strictly increase in the order its write lock is held, as Lock.Fence
// says. A read lock returns the token of the last write lock granted
// before it (0 if none is known): what it reads was written under at most
// that token.
func (l *RWLock) Fence() int64 { return l.fence }

// Reenter adds a hold: each Reenter (and each re-entering RLock or Lock)
// needs its own Unlock, and only the last Unlock releases. It makes no
// Redis call and does not change the lease.
func (l *RWLock) Reenter(ctx context.Context) error { return l.reenter(ctx) }

// Unlock drops one hold; the last one releases the lock in Redis and lets
// in the waiters at the head of the queue that now fit (the next writer,
// or the readers up to the next writer). It returns ErrNotHeld if the lock
// was lost or released. If Redis cannot be reached it returns an error and
// the lock stays held and renewed: call Unlock again (it returns nil if the
// failed call had released it after all).
func (l *RWLock) Unlock(ctx context.Context) error { return l.release(ctx) }
