package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// MultiClient hands out MultiMutexes: locks held over several independent
// Redis masters at once, one Client per master. It adds no state of its
// own; the Clients keep theirs (one subscription each).
type MultiClient struct {
	clients []*Client
}

// NewMulti returns a MultiClient over clients, one per Redis master, in the
// order given: every MultiMutex takes its parts in that order, so two
// processes that may lock the same names must pass their masters in the
// same order (two orders can deadlock each other until a context ends).
// It panics if clients is empty.
func NewMulti(clients ...*Client) *MultiClient {
	if len(clients) == 0 {
		panic("lock: NewMulti needs at least one client")
	}
	return &MultiClient{clients: append([]*Client(nil), clients...)}
}

// MultiMutex is one named lock over every master of a MultiClient: it is
// held only while the lock of that name is held on every master. It is
// safe for concurrent use.
type MultiMutex struct {
	name  string
	parts []*Mutex // one per master, in the MultiClient's order
}

// Mutex returns the lock called name on every master, each part configured
// with opts (WithReplicas applies to each master and its own replicas).
func (mc *MultiClient) Mutex(name string, opts ...MutexOption) *MultiMutex {
	mm := &MultiMutex{name: name, parts: make([]*Mutex, len(mc.clients))}
	for i, c := range mc.clients {
		mm.parts[i] = c.Mutex(name, opts...)
	}
	return mm
}

// Name returns the name of the lock.
func (mm *MultiMutex) Name() string { return mm.name }

// Lock obtains the lock on every master, in the MultiClient's order,
// waiting for each as Mutex.Lock does. If a part fails (ctx ends, a master
// cannot be reached), the parts held are released and Lock returns the
// error, holding nothing; a part lost before the last is held makes Lock
// start over. It is not reentrant: with the Context of a held MultiLock
// of the same name it waits until ctx ends.
func (mm *MultiMutex) Lock(ctx context.Context) (*MultiLock, error) {
	for {
		parts, err := mm.acquire(ctx, (*Mutex).Lock)
		if err != nil {
			return nil, err
		}
		if ml := mm.start(ctx, parts); ml != nil {
			return ml, nil
		}
	}
}

// TryLock makes one attempt on every master and returns ErrNotObtained,
// leaving nothing held, if any part is held by someone else.
func (mm *MultiMutex) TryLock(ctx context.Context) (*MultiLock, error) {
	parts, err := mm.acquire(ctx, (*Mutex).TryLock)
	if err != nil {
		return nil, err
	}
	if ml := mm.start(ctx, parts); ml != nil {
		return ml, nil
	}
	return nil, ErrNotObtained
}

// acquire takes every part with take, in order; on a failure it releases
// the parts taken and returns the error.
func (mm *MultiMutex) acquire(ctx context.Context, take func(*Mutex, context.Context) (*Lock, error)) ([]*Lock, error) {
	parts := make([]*Lock, 0, len(mm.parts))
	for i, m := range mm.parts {
		l, err := take(m, ctx) // returns soon after ctx ends, even if m's master is down
		if err != nil {
			releaseAll(ctx, parts)
			if errors.Is(err, ErrNotObtained) || ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("lock: multi %q: master %d: %w", mm.name, i, err)
		}
		parts = append(parts, l)
	}
	return parts, nil
}

// releaseAll releases held parts, last first, and returns what failed.
// A part that cannot be released expires with its lease: its renewals
// stop with the failed release (see Lock.Unlock).
func releaseAll(ctx context.Context, parts []*Lock) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var errs []error
	for i := len(parts) - 1; i >= 0; i-- {
		if err := parts[i].Unlock(ctx); err != nil {
			errs = append(errs, fmt.Errorf("master %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// MultiLock is one acquisition of a MultiMutex: a Lock on every master.
// Each part keeps its own lease and watchdog; the MultiLock is lost as
// soon as any part is. It is safe for concurrent use.
type MultiLock struct {
	mm    *MultiMutex
	parts []*Lock
	stops []func() bool // stop watching each part's Context

	ctx    context.Context
	cancel context.CancelCauseFunc
	lost   chan struct{}

	mu    sync.Mutex
	state state
}

// start watches held parts and returns their MultiLock, or, if a part
// was lost meanwhile, releases the others and returns nil.
func (mm *MultiMutex) start(ctx context.Context, parts []*Lock) *MultiLock {
	ml := &MultiLock{mm: mm, parts: parts, lost: make(chan struct{})}
	ml.ctx, ml.cancel = context.WithCancelCause(context.WithoutCancel(ctx))
	for _, p := range parts {
		pctx := p.Context()
		ml.stops = append(ml.stops, context.AfterFunc(pctx, func() {
			if errors.Is(context.Cause(pctx), ErrLost) {
				ml.finish(lost)
			}
		}))
	}
	for _, p := range parts {
		select {
		case <-p.Lost():
			ml.finish(lost)
			_ = releaseAll(ctx, parts)
			return nil
		default:
		}
	}
	return ml
}

// finish moves a held MultiLock to s and tells its holder.
func (ml *MultiLock) finish(s state) {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	if ml.state != held {
		return
	}
	ml.state = s
	if s == lost {
		ml.cancel(ErrLost)
		close(ml.lost)
	} else {
		ml.cancel(nil)
	}
}

// Name returns the name of the lock.
func (ml *MultiLock) Name() string { return ml.mm.name }

// Parts returns the Lock held on each master, in the MultiClient's order.
// Release the MultiLock, not its parts.
func (ml *MultiLock) Parts() []*Lock { return append([]*Lock(nil), ml.parts...) }

// Fences returns the fencing token of each part, in the MultiClient's
// order. Each element strictly increases in the order the MultiLock is
// held (a MultiLock is held only while every part is), so a resource may
// check any one of them — the same one every time.
func (ml *MultiLock) Fences() []int64 {
	f := make([]int64, len(ml.parts))
	for i, p := range ml.parts {
		f[i] = p.Fence()
	}
	return f
}

// Fence returns the fencing token of the first master's part: it strictly
// increases in the order the MultiLock is held, like Lock.Fence, and a
// resource that refuses tokens lower than the highest it has seen refuses
// a stale holder. Tokens of different masters are not comparable.
func (ml *MultiLock) Fence() int64 { return ml.parts[0].Fence() }

// Lost returns a channel closed when any part is lost while held (see
// Lock.Lost). The parts still held stay held until Unlock.
func (ml *MultiLock) Lost() <-chan struct{} { return ml.lost }

// Context returns a context cancelled when the MultiLock is released by
// Unlock (cause context.Canceled) or lost (cause ErrLost). It carries the
// values of the context the lock was obtained with.
func (ml *MultiLock) Context() context.Context { return ml.ctx }

// Unlock releases every part, last master first, also after the
// MultiLock was lost. It returns nil if all were released; otherwise the
// errors of the parts that were not (ErrNotHeld for a part that was lost),
// joined. A part whose release failed expires with its lease. A second
// Unlock returns ErrNotHeld.
func (ml *MultiLock) Unlock(ctx context.Context) error {
	ml.mu.Lock()
	done := ml.state == released
	ml.state = released
	ml.mu.Unlock()
	if done {
		return ErrNotHeld
	}
	for _, stop := range ml.stops {
		stop()
	}
	err := releaseAll(ctx, ml.parts)
	ml.cancel(nil) // no-op if lost
	if err != nil {
		return fmt.Errorf("lock: multi %q: unlock: %w", ml.mm.name, err)
	}
	return nil
}

// Extend sets every part's remaining lease to d (see Lock.Extend). It
// returns the joined errors of the parts it could not extend.
func (ml *MultiLock) Extend(ctx context.Context, d time.Duration) error {
	var errs []error
	for i, p := range ml.parts {
		if err := p.Extend(ctx, d); err != nil {
			errs = append(errs, fmt.Errorf("master %d: %w", i, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lock: multi %q: extend: %w", ml.mm.name, err)
	}
	return nil
}
