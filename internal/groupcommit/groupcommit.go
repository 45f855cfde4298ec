// Package groupcommit sends the concurrent calls of one key in batches:
// the async gate's orders (async/gatebatch.go), the waiting room's joins
// and polls (admission/batch.go), the batch strategy's orders
// (strategy/group.go) and the numbering of new subjects (auth/numbering.go). A key's calls queue; a worker takes up to Max of
// them, runs them as one batch and takes the next ones. A lone call goes
// out at once, alone; under load a batch is whatever queued while the
// previous one ran, so nobody waits for a timer (unless the queue is
// given a Linger: then a worker that just ran a batch may wait a bounded
// time for the next one to fill). A key's queue lives in
// a Map while it has work and leaves it when empty, so keys nobody uses
// leave nothing behind.
//
// The one rule for a caller whose ctx ends:
//   - before a batch takes its call, the call is dropped, never sent, and
//     Do returns ctx's error at once;
//   - once a batch has taken it, Do waits for the batch's answer, also
//     after ctx ended, and returns it.
//
// So a caller is never told a call failed that its batch carried out: the
// batch strategy promises that no buyer is told an order failed that the
// database holds, and the gate's and the waiting room's callers get the
// script's answer rather than one as for a lost reply. The wait is bounded
// by the batch's run, which a Run must bound with its own timeout (not
// any caller's ctx: a batch serves many callers, and one leaving must not
// fail the others). The price: while a server stalls, the caller of a
// taken call waits for that bound, not for its ctx. The other rule, to
// return at once once taken too, would tell a batch strategy buyer an
// order failed that is then committed.
package groupcommit

import (
	"context"
	"sync"
	"time"
)

// Call is the queue's part of one call. Embed it in a call type: the
// batch's answer goes in that type's own fields, set by Run and read by
// the caller once Do returned nil.
type Call struct {
	ctx  context.Context // the caller's
	done chan struct{}   // closed once the call's batch ran
	// taken and dropped are guarded by the queue's mu: taken once a batch
	// holds the call, dropped when its ctx ended before that.
	taken, dropped bool
}

func (c *Call) call() *Call { return c }

// Caller is a call type embedding Call (as a pointer type, *T, does).
type Caller interface{ call() *Call }

// Config is a queue's batching and what it runs.
type Config[T Caller] struct {
	// Workers is how many batches of the queue run at once (at least 1).
	Workers int
	// Max is the most calls in one batch (at least 1).
	Max int
	// Admit, when set, runs as a call is queued, with how many calls are
	// queued ahead of it (some may be dropped ones); an error refuses the
	// call at once, queueing nothing, and Do returns it.
	Admit func(c T, queued int) error
	// Take, when set, runs for each call as a batch takes it.
	Take func(c T)
	// Run runs a batch and answers each of its calls, in the calls' own
	// fields, within a bound of its own.
	Run func(batch []T)
	// Linger, when positive, is how long a worker that has just run a
	// batch may wait for more calls before it takes the next one, while
	// fewer are queued than Fill asks: fewer, larger batches when each
	// batch has a fixed cost that small ones pay per call, for at most
	// Linger more per call. It never delays a call that finds the queue
	// idle (no batch ran just before, or none was queued as it ended).
	Linger time.Duration
	// Fill returns, given the calls queued as a batch ended (at least 1),
	// how many end the Linger (capped at Max; nil: Max). The calls queued
	// during a batch measure the demand.
	Fill func(queued int) int
}

// Queue is the calls of one key waiting for a batch.
type Queue[T Caller] struct {
	cfg  Config[T]
	home *sync.Map // where Map.Do stored it
	key  any

	mu      sync.Mutex
	calls   []T // in arrival order
	running int // workers
	// filled, while a worker lingers, is closed by the call that makes
	// fill calls queued.
	filled chan struct{}
	fill   int
}

// New returns an empty queue running cfg. Admit and Take run under the
// queue's lock: they must be quick and must not call Do.
func New[T Caller](cfg Config[T]) *Queue[T] {
	cfg.Workers, cfg.Max = max(cfg.Workers, 1), max(cfg.Max, 1)
	return &Queue[T]{cfg: cfg}
}

// Map holds the queues of keys that have work.
type Map[K comparable, T Caller] struct {
	queues sync.Map // K → *Queue[T]
}

// Has reports whether key has a queue now.
func (m *Map[K, T]) Has(key K) bool {
	_, ok := m.queues.Load(key)
	return ok
}

// Len returns how many calls key's queue holds now (some may be dropped
// ones), 0 without a queue.
func (m *Map[K, T]) Len(key K) int {
	v, ok := m.queues.Load(key)
	if !ok {
		return 0
	}
	return v.(*Queue[T]).len()
}

// Do runs c in the next batch of key's queue, made by open when key has
// none, and returns nil once c is answered, Admit's error, or ctx's error
// for a call dropped (see the package's rule).
func (m *Map[K, T]) Do(ctx context.Context, key K, c T, open func() *Queue[T]) error {
	v, ok := m.queues.Load(key)
	if !ok {
		q := open()
		q.home, q.key = &m.queues, key
		v, _ = m.queues.LoadOrStore(key, q)
	}
	return v.(*Queue[T]).do(ctx, c)
}

// do queues c, starting a worker if the queue has room for one, and
// waits for its answer.
func (q *Queue[T]) do(ctx context.Context, c T) error {
	b := c.call()
	b.ctx, b.done = ctx, make(chan struct{})
	b.taken, b.dropped = false, false
	start, err := q.add(c)
	if err != nil {
		return err
	}
	if start {
		go q.work()
	}
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	if !b.taken {
		b.dropped = true
		q.mu.Unlock()
		return ctx.Err()
	}
	q.mu.Unlock()
	<-b.done
	return nil
}

// add queues c, or returns Admit's refusal, and returns whether the
// caller must start a worker.
func (q *Queue[T]) add(c T) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cfg.Admit != nil {
		if err := q.cfg.Admit(c, len(q.calls)); err != nil {
			return false, err
		}
	}
	q.calls = append(q.calls, c)
	if q.filled != nil && len(q.calls) >= q.fill {
		close(q.filled)
		q.filled = nil
	}
	if q.running < q.cfg.Workers {
		q.running++
		return true, nil
	}
	return false, nil
}

// work runs batches until the queue is empty. A caller that found the
// queue in its Map just before the last worker removed it still gets its
// batch: its add starts a worker.
func (q *Queue[T]) work() {
	for queued := 0; ; {
		if queued > 0 && q.cfg.Linger > 0 {
			q.linger(queued)
		}
		batch := q.next()
		if batch == nil {
			return
		}
		q.cfg.Run(batch)
		// Counted before the batch's callers hear back: a call one of
		// them makes on hearing finds the queue idle, and goes at once.
		queued = q.len()
		for _, c := range batch {
			close(c.call().done)
		}
		if testHookAnswered != nil {
			testHookAnswered()
		}
	}
}

// testHookAnswered, set by a test, runs in the worker once a batch's
// callers heard back, before it takes the next.
var testHookAnswered func()

// len returns how many calls are queued (some may be dropped ones).
func (q *Queue[T]) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.calls)
}

// linger waits, after a batch that ended with queued calls waiting (at
// least 1), until Fill's count of calls is queued or Linger passed, when
// some calls but fewer are queued and no other worker lingers. Calls
// whose ctx ends meanwhile are dropped by next as always.
func (q *Queue[T]) linger(queued int) {
	q.mu.Lock()
	n, fill := len(q.calls), q.cfg.Max
	if q.cfg.Fill != nil {
		fill = min(q.cfg.Fill(queued), fill)
	}
	if n == 0 || n >= fill || q.filled != nil {
		q.mu.Unlock()
		return
	}
	filled := make(chan struct{})
	q.filled, q.fill = filled, fill
	q.mu.Unlock()
	t := time.NewTimer(q.cfg.Linger)
	select {
	case <-filled:
	case <-t.C:
	}
	t.Stop()
	q.mu.Lock()
	if q.filled == filled {
		q.filled = nil
	}
	q.mu.Unlock()
}

// next takes up to Max calls off the front of the queue, skipping those
// dropped or whose ctx ended (dropping them: their callers return ctx's
// error), and runs Take for each. When none is left it returns nil and
// the worker leaves; the last one out removes the queue from its Map.
func (q *Queue[T]) next() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	var batch []T
	i := 0
	for ; i < len(q.calls) && len(batch) < q.cfg.Max; i++ {
		c := q.calls[i]
		b := c.call()
		if b.dropped || b.ctx.Err() != nil {
			b.dropped = true
			continue
		}
		b.taken = true
		if q.cfg.Take != nil {
			q.cfg.Take(c)
		}
		batch = append(batch, c)
	}
	// Copy the rest so the old array, and the calls in it, can be
	// collected.
	q.calls = append([]T(nil), q.calls[i:]...)
	if len(batch) > 0 {
		return batch
	}
	q.running--
	if q.running == 0 && q.home != nil {
		q.home.CompareAndDelete(q.key, q)
	}
	return nil
}
