package auth

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flashsale/flashsale/internal/groupcommit"
)

// BuyerBatch is the most subjects numbered in one BuyerStore call.
const BuyerBatch = 256

// numberingSlots is how many batches of subjects are numbered at once:
// while they are, the new subjects that arrive wait in the next batch, so
// a burst of new buyers costs a few round trips, not one each.
const numberingSlots = 2

// numberingTimeout bounds one batch's store calls: its own, not any
// caller's, since a batch serves many.
const numberingTimeout = 10 * time.Second

// numbering numbers the subjects the subject cache does not know, in
// batches: the group commit of internal/groupcommit, on one queue. A
// subject's numbering is a flight that runs to its end in the background,
// whoever waits for it: the callers of a subject share its flight, and
// each stops waiting when its own request ends, while the flight still
// puts the number in the subject cache for the next request.
type numbering struct {
	store   BuyerStore
	cache   *subjectCache
	batches groupcommit.Map[struct{}, *flight]

	mu      sync.Mutex
	flights map[subjectKey]*flight // the subjects on their way
}

// flight is one subject's numbering: id or err are set before ready
// closes.
type flight struct {
	groupcommit.Call
	key   subjectKey
	id    int64
	err   error
	ready chan struct{}
}

func newNumbering(store BuyerStore, cache *subjectCache) *numbering {
	return &numbering{store: store, cache: cache, flights: map[subjectKey]*flight{}}
}

// number returns the number of k, numbering it durably (in the store
// before it returns) if it is new; the subject cache has it after. A
// caller whose ctx ends stops waiting with the buyer error; the flight
// goes on.
func (n *numbering) number(ctx context.Context, k subjectKey) (int64, error) {
	f := n.flight(k)
	select {
	case <-f.ready:
		return f.id, f.err
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", errBuyer, ctx.Err())
	}
}

// flight returns k's flight, starting one when none is on its way.
func (n *numbering) flight(k subjectKey) *flight {
	n.mu.Lock()
	defer n.mu.Unlock()
	if f, ok := n.flights[k]; ok {
		return f
	}
	f := &flight{key: k, ready: make(chan struct{})}
	n.flights[k] = f
	go func() {
		// Never dropped (no ctx ends), never refused (no Admit): the
		// batch sets f's answer.
		_ = n.batches.Do(context.Background(), struct{}{}, f, n.open)
		n.mu.Lock()
		delete(n.flights, k)
		n.mu.Unlock()
		close(f.ready)
	}()
	return f
}

// open returns the queue of the batches.
func (n *numbering) open() *groupcommit.Queue[*flight] {
	return groupcommit.New(groupcommit.Config[*flight]{Workers: numberingSlots, Max: BuyerBatch, Run: n.run})
}

// run numbers a batch, one store call per issuer in it, and caches the
// ids.
func (n *numbering) run(batch []*flight) {
	ctx, cancel := context.WithTimeout(context.Background(), numberingTimeout)
	defer cancel()
	byIssuer := map[string][]*flight{}
	for _, f := range batch {
		byIssuer[f.key.issuer] = append(byIssuer[f.key.issuer], f)
	}
	for issuer, fs := range byIssuer {
		n.numberAll(ctx, issuer, fs)
	}
}

// numberAll numbers one issuer's flights, and caches their ids.
func (n *numbering) numberAll(ctx context.Context, issuer string, fs []*flight) {
	subjects := make([]string, len(fs))
	for i, f := range fs {
		subjects[i] = f.key.subject
	}
	got, err := n.store.BuyerNumbers(ctx, issuer, subjects)
	if err == nil && len(got) != len(subjects) {
		err = fmt.Errorf("%d numbers for %d subjects", len(got), len(subjects))
	}
	for i, f := range fs {
		switch {
		case err != nil:
			f.err = fmt.Errorf("%w: %w", errBuyer, err)
		case got[i] <= 0 || got[i] >= BuyerBase:
			f.err = fmt.Errorf("%w: the store numbered (%q, %q) %d", errBuyer, issuer, f.key.subject, got[i])
		default:
			f.id = BuyerBase + got[i]
			n.cache.put(f.key, f.id)
		}
	}
}
