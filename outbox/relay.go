// Package outbox relays the events the store writes in the outbox (see
// store/outbox.go) to the shop's sinks: NATS JetStream (nats.go) and
// signed webhooks (webhook.go), at least once and in order per order.
// The design: docs/events.md.
package outbox

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/flashsale/flashsale/store"
)

// Sink delivers events to one destination.
type Sink interface {
	// Name is the sink's cursor in the outbox (outbox_cursors).
	Name() string
	// Start is the position a new cursor starts at: 0 for every event
	// still kept, the head for the events from now on.
	Start(ctx context.Context, db *store.DB) (int64, error)
	// Deliver delivers events, in order, and returns how many from the
	// first were delivered (acknowledged by the destination). An error
	// says why the next one was not.
	Deliver(ctx context.Context, events []store.OutboxEvent) (int, error)
}

// Relay sequences the outbox, relays it to every sink and prunes what all
// of them have: one Relay per instance, any number of instances. Each
// sink is relayed by one instance at a time, the holder of its cursor's
// lease; the others stand by and take over when the lease runs out, from
// the cursor, so an event is delivered again only if its delivery was not
// recorded (at least once).
type Relay struct {
	DB    *store.DB
	Sinks []Sink
	// Owner names this instance in the cursors' leases; it must differ
	// between instances.
	Owner string
	// Retention is how long delivered events are kept (0: 7 days).
	Retention time.Duration
	// Lease is how long a cursor's lease lasts (0: 5 s); Poll how often
	// an idle loop looks for new events (0: 20 ms); Batch the events read
	// at once (0: 1000).
	Lease, Poll time.Duration
	Batch       int
	Logger      *slog.Logger
	// Delivered, if set, is called with each sink's delivered events.
	Delivered func(sink string, events []store.OutboxEvent)
	// Failed, if set, is called with each failed delivery.
	Failed func(sink string, err error)
	// Webhooks relays the registered webhooks too (webhooks.go), each
	// through WebhookClient (nil: a client with a 10 s timeout), retrying
	// an event for WebhookRetryFor (0: 24 h) before dead-lettering it.
	Webhooks        bool
	WebhookClient   *http.Client
	WebhookRetryFor time.Duration
}

// defaults fills in the zero fields.
func (r *Relay) defaults() {
	if r.Retention <= 0 {
		r.Retention = 7 * 24 * time.Hour
	}
	if r.Lease <= 0 {
		r.Lease = 5 * time.Second
	}
	if r.Poll <= 0 {
		r.Poll = 20 * time.Millisecond
	}
	if r.Batch <= 0 {
		r.Batch = 1000
	}
	if r.Logger == nil {
		r.Logger = slog.Default()
	}
	if r.WebhookClient == nil {
		r.WebhookClient = &http.Client{Timeout: 10 * time.Second}
	}
	if r.WebhookRetryFor <= 0 {
		r.WebhookRetryFor = 24 * time.Hour
	}
}

// Run relays until ctx is done, then gives up its leases.
func (r *Relay) Run(ctx context.Context) {
	r.defaults()
	var wg sync.WaitGroup
	wg.Go(func() { r.sequence(ctx) })
	for _, s := range r.Sinks {
		wg.Go(func() { r.relay(ctx, s) })
	}
	if r.Webhooks {
		wg.Go(func() { r.webhooks(ctx) })
	}
	wg.Wait()
}

// pruneEvery is how often delivered events past the retention are pruned.
const pruneEvery = 10 * time.Second

// sequence gives committed events their positions, and prunes.
func (r *Relay) sequence(ctx context.Context) {
	lastPrune := time.Time{}
	for ctx.Err() == nil {
		n, err := r.DB.SequenceEvents(ctx, r.Batch)
		if err != nil && ctx.Err() == nil {
			r.Logger.Warn("outbox: sequencing events", "err", err)
		}
		if time.Since(lastPrune) > pruneEvery {
			lastPrune = time.Now()
			if _, err := r.DB.PruneEvents(ctx, time.Now().Add(-r.Retention), r.Batch); err != nil && ctx.Err() == nil {
				r.Logger.Warn("outbox: pruning events", "err", err)
			}
		}
		if n < r.Batch {
			sleep(ctx, r.Poll)
		}
	}
}

// relay delivers the sink's events while this instance holds its lease,
// and waits for the lease otherwise.
func (r *Relay) relay(ctx context.Context, s Sink) {
	name := s.Name()
	defer r.DB.ReleaseCursor(context.WithoutCancel(ctx), name, r.Owner) //nolint:errcheck // the lease runs out anyway
	for ctx.Err() == nil {
		start, err := s.Start(ctx, r.DB)
		if err == nil {
			var held bool
			held, err = r.hold(ctx, s, start)
			if errors.Is(err, errDisabled) {
				return
			}
			if held {
				continue
			}
		}
		if err != nil && ctx.Err() == nil {
			r.Logger.Warn("outbox: sink cursor", "sink", name, "err", err)
		}
		sleep(ctx, r.Lease/4+rand.N(r.Lease/4))
	}
}

// hold claims the sink's cursor and, while it holds it, delivers what
// follows it. It reports whether it held the cursor at all.
func (r *Relay) hold(ctx context.Context, s Sink, start int64) (bool, error) {
	name := s.Name()
	now := time.Now()
	pos, ok, err := r.DB.ClaimCursor(ctx, name, r.Owner, start, now, now.Add(r.Lease))
	if err != nil || !ok {
		return false, err
	}
	renewed, failures, retryAt := now, 0, time.Time{}
	for ctx.Err() == nil {
		if wait := time.Until(retryAt); wait > 0 {
			// Backing off: keep the lease meanwhile.
			sleep(ctx, min(wait, r.Lease/3))
		} else {
			var err error
			pos, failures, err = r.deliver(ctx, s, pos, failures)
			if errors.Is(err, errDisabled) {
				return true, err
			}
			if errors.Is(err, errLostLease) {
				return true, nil
			}
			if err != nil && ctx.Err() == nil {
				retryAt = time.Now().Add(r.backoff(s, failures, err))
			}
		}
		if time.Since(renewed) > r.Lease/3 {
			ok, err := r.DB.AdvanceCursor(ctx, name, r.Owner, pos, time.Now().Add(r.Lease))
			if err != nil || !ok {
				return true, err // another instance has it now
			}
			renewed = time.Now()
		}
	}
	return true, nil
}

// deliver delivers one batch after pos and moves the cursor past what
// was delivered; it returns the new position, the failures in a row, and
// the failure. It sleeps a poll when it found no full batch.
func (r *Relay) deliver(ctx context.Context, s Sink, pos int64, failures int) (int64, int, error) {
	name := s.Name()
	events, err := r.DB.EventsAfter(ctx, pos, r.Batch)
	if err != nil {
		return pos, failures + 1, err
	}
	n := 0
	if len(events) > 0 {
		n, err = s.Deliver(ctx, events)
	}
	if n > 0 {
		pos = events[n-1].Pos
		if r.Delivered != nil {
			r.Delivered(name, events[:n])
		}
		ok, aerr := r.DB.AdvanceCursor(ctx, name, r.Owner, pos, time.Now().Add(r.Lease))
		if aerr != nil || !ok {
			return pos, failures, cmp.Or(aerr, errLostLease)
		}
	}
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, errDisabled) {
			if r.Failed != nil {
				r.Failed(name, err)
			}
			r.Logger.Warn("outbox: delivery failed", "sink", name, "err", err, "failures", failures+1)
		}
		return pos, failures + 1, err
	}
	if len(events) < r.Batch {
		sleep(ctx, r.Poll)
	}
	return pos, 0, nil
}

// errLostLease says another instance took the sink's cursor over.
var errLostLease = errors.New("outbox: lost the cursor's lease")

// backoffer is a sink with its own backoff.
type backoffer interface {
	Backoff(failures int, err error) time.Duration
}

// backoff is the wait before retrying s after failures in a row.
func (r *Relay) backoff(s Sink, failures int, err error) time.Duration {
	if b, ok := s.(backoffer); ok {
		return b.Backoff(failures, err)
	}
	return backoff(failures, r.Lease/3)
}

// backoff is the wait after the nth failure in a row: doubling from 50 ms
// up to ceiling, with full jitter on the upper half.
func backoff(n int, ceiling time.Duration) time.Duration {
	d := 50 * time.Millisecond << min(n-1, 16)
	d = min(d, ceiling)
	return d/2 + rand.N(d/2+1)
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// jitter returns a random fraction in [0, 1).
func jitter() float64 { return rand.Float64() }
