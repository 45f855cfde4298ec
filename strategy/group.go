package strategy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// batchCommitTimeout bounds one batch's transaction, retries included. It
// is not any caller's context: a batch serves many callers, and one leaving
// must not fail the others.
const batchCommitTimeout = 5 * time.Second

// defaultBatchMax is the default BatchMax: large enough that a batch is
// rarely cut, small enough that its statements stay one chunk each.
const defaultBatchMax = 500

// Group commit: one transaction per batch locks the voucher's row, stores
// the orders of buyers with room while stock lasts with one multi-row
// insert, and takes their units in one conditional decrement
// (store.SellBatch), so the hot row is locked and flushed once per batch
// instead of once per order. Batches form on their own: a voucher's orders
// queue in each process, and one committer per voucher takes everything
// queued (up to BatchMax) as soon as its previous commit ends — an order
// at an idle voucher is committed at once, and under load a batch is
// whatever arrived during the previous commit. Several processes' batches
// run one after another on the voucher's row lock. A failed batch answers
// each of its orders with the failure: unavailable when the database is
// unreachable or the commit ran out of time, busy when it kept losing lock
// races.

// group collects one voucher's orders in this process and commits them in
// batches, one batch at a time.
type group struct {
	voucher *flashsale.Voucher
	db      *store.DB
	max     int

	mu         sync.Mutex
	queue      []*request // in arrival order
	committing bool       // a committer goroutine runs
}

// request is one queued order and where its answer goes.
type request struct {
	order *flashsale.Order
	done  chan error // buffered: the committer never waits for the caller
	// taken and dropped are guarded by group.mu: taken once a batch holds
	// the request, dropped when its caller left before that.
	taken, dropped bool
}

// place queues o and waits for its answer; see batch.PlaceOrder.
func (g *group) place(ctx context.Context, o *flashsale.Order) (*flashsale.Order, error) {
	r := &request{order: o, done: make(chan error, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, r)
	if !g.committing {
		g.committing = true
		go g.commitAll()
	}
	g.mu.Unlock()
	var err error
	select {
	case err = <-r.done:
	case <-ctx.Done():
		g.mu.Lock()
		if !r.taken {
			r.dropped = true
			g.mu.Unlock()
			return nil, ctx.Err()
		}
		g.mu.Unlock()
		err = <-r.done
	}
	if err != nil {
		return nil, err
	}
	return o, nil
}

// commitAll commits batches until the queue is empty, then ends. Starting
// a committer only when none runs is what makes the batches: whatever
// queues during one commit is the next batch.
func (g *group) commitAll() {
	for {
		g.mu.Lock()
		batch := g.next()
		if len(batch) == 0 {
			g.committing = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		g.commit(batch)
	}
}

// next takes up to max requests from the front of the queue, skipping the
// dropped ones, and marks them taken. g.mu must be held.
func (g *group) next() []*request {
	var batch []*request
	i := 0
	for ; i < len(g.queue) && len(batch) < g.max; i++ {
		if r := g.queue[i]; !r.dropped {
			r.taken = true
			batch = append(batch, r)
		}
	}
	// Copy the rest so the queue's old array, and the requests in it, can
	// be collected.
	g.queue = append([]*request(nil), g.queue[i:]...)
	return batch
}

// overLimit returns the refusal of an order SellBatch found past its
// buyer's limit, naming the buyer's order when the limit is 1.
func (g *group) overLimit(ctx context.Context, o *flashsale.Order) error {
	units, latest, err := g.db.BuyerUnits(ctx, o.VoucherID, o.UserID)
	if err != nil {
		// Only the naming failed: the refusal stands.
		units, latest = g.voucher.BuyerLimit(), 0
	}
	if err := overLimit(g.voucher, units, o.Units(), latest); err != nil {
		return err
	}
	// An order earlier in the same batch took the room.
	return overLimit(g.voucher, g.voucher.BuyerLimit(), o.Units(), latest)
}

// commit runs one batch's transaction and answers each of its requests.
func (g *group) commit(batch []*request) {
	orders := make([]flashsale.Order, len(batch))
	for i, r := range batch {
		orders[i] = *r.order
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchCommitTimeout)
	defer cancel()
	sales, err := g.db.SellBatch(ctx, g.voucher.ID, orders)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && flashsale.ErrorCode(err) == flashsale.EInternal {
		err = fmt.Errorf("%w: %w", &flashsale.Error{Code: flashsale.EUnavailable, Message: "the database did not answer in time; try again shortly", RetryAfter: time.Second}, err)
	}
	for i, r := range batch {
		if err != nil {
			r.done <- err
			continue
		}
		switch sales[i] {
		case flashsale.OutcomeInserted:
			*r.order = orders[i]
			r.done <- nil
		case flashsale.OutcomeConflict:
			r.done <- g.overLimit(ctx, r.order)
		default:
			r.done <- soldOut()
		}
	}
}
