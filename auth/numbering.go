package auth

import (
	"context"
	"fmt"
	"sync"
)

// BuyerBatch is the most subjects numbered in one BuyerStore call.
const BuyerBatch = 256

// numberingSlots is how many batches of subjects are numbered at once:
// while they are, the new subjects that arrive wait in the next batch, so
// a burst of new buyers costs a few round trips, not one each.
const numberingSlots = 2

// numbering numbers the subjects the subject cache does not know, in
// batches (group commit): a caller adds its subject to the batch being
// filled, then either a slot frees, and it numbers the oldest batch
// waiting, or its own batch is numbered by another caller. Concurrent
// requests of one subject share its batch.
type numbering struct {
	store BuyerStore
	cache *subjectCache
	slots chan struct{}

	mu      sync.Mutex
	queue   []*batch              // batches waiting for a slot, oldest first
	waiting map[subjectKey]*batch // every subject queued or being numbered
}

// batch is a group of subjects numbered together: ids (or err) are set
// before done closes.
type batch struct {
	keys []subjectKey
	ids  map[subjectKey]int64
	err  error
	done chan struct{}
}

func newNumbering(store BuyerStore, cache *subjectCache) *numbering {
	return &numbering{store: store, cache: cache, slots: make(chan struct{}, numberingSlots), waiting: map[subjectKey]*batch{}}
}

// number returns the number of k, numbering it durably (in the store
// before it returns) if it is new; the subject cache has it after. A
// caller that ends waits no longer, unless it is numbering a batch: the
// batch's other callers wait on that.
func (n *numbering) number(ctx context.Context, k subjectKey) (int64, error) {
	b := n.join(k)
	for queued := true; queued; {
		select {
		case <-b.done:
			queued = false
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: %w", errBuyer, ctx.Err())
		case n.slots <- struct{}{}:
			next := n.take()
			if next != nil {
				n.run(context.WithoutCancel(ctx), next)
			}
			<-n.slots
			// None waiting: b is being numbered by another caller.
			queued = next != nil
		}
	}
	select {
	case <-b.done:
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %w", errBuyer, ctx.Err())
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.ids[k], nil
}

// join returns the batch that numbers k: the one it is already in, else
// the newest waiting one (a new one if that is full or none waits).
func (n *numbering) join(k subjectKey) *batch {
	n.mu.Lock()
	defer n.mu.Unlock()
	if b, ok := n.waiting[k]; ok {
		return b
	}
	if len(n.queue) == 0 || len(n.queue[len(n.queue)-1].keys) >= BuyerBatch {
		n.queue = append(n.queue, &batch{done: make(chan struct{})})
	}
	b := n.queue[len(n.queue)-1]
	b.keys = append(b.keys, k)
	n.waiting[k] = b
	return b
}

// take removes the oldest waiting batch from the queue; nil if none.
func (n *numbering) take() *batch {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.queue) == 0 {
		return nil
	}
	b := n.queue[0]
	n.queue[0] = nil
	n.queue = n.queue[1:]
	return b
}

// run numbers a batch, one store call per issuer in it, caches the ids
// and wakes its callers.
func (n *numbering) run(ctx context.Context, b *batch) {
	b.ids = make(map[subjectKey]int64, len(b.keys))
	byIssuer := map[string][]string{}
	for _, k := range b.keys {
		byIssuer[k.issuer] = append(byIssuer[k.issuer], k.subject)
	}
	for issuer, subjects := range byIssuer {
		if b.err = n.numberAll(ctx, issuer, subjects, b.ids); b.err != nil {
			break
		}
	}
	n.mu.Lock()
	for _, k := range b.keys {
		delete(n.waiting, k)
	}
	n.mu.Unlock()
	close(b.done)
}

// numberAll numbers one issuer's subjects into ids, and the cache.
func (n *numbering) numberAll(ctx context.Context, issuer string, subjects []string, ids map[subjectKey]int64) error {
	got, err := n.store.BuyerNumbers(ctx, issuer, subjects)
	if err == nil && len(got) != len(subjects) {
		err = fmt.Errorf("%d numbers for %d subjects", len(got), len(subjects))
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errBuyer, err)
	}
	for i, s := range subjects {
		if got[i] <= 0 || got[i] >= BuyerBase {
			return fmt.Errorf("%w: the store numbered (%q, %q) %d", errBuyer, issuer, s, got[i])
		}
		k := subjectKey{issuer, s}
		ids[k] = BuyerBase + got[i]
		n.cache.put(k, BuyerBase+got[i])
	}
	return nil
}
