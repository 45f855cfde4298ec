package strategy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/groupcommit"
	"github.com/flashsale/flashsale/store"
)

// batchCommitTimeout bounds one batch's transaction, retries included. It
// is not any caller's context: a batch serves many callers, and one leaving
// must not fail the others.
const batchCommitTimeout = 5 * time.Second

// defaultBatchMax is the default BatchMax: large enough that a batch is
// rarely cut, small enough that its statements stay one chunk each.
const defaultBatchMax = 500

// Group commit (internal/groupcommit): one transaction per batch locks
// the voucher's row, stores the orders of buyers with room while stock
// lasts with one multi-row insert, and takes their units in one conditional decrement
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

// group is one voucher's queue of orders in this process (a
// groupcommit.Queue while it has work): one batch at a time.
type group struct {
	voucher *flashsale.Voucher
	db      *store.DB
}

// request is one queued order and its answer.
type request struct {
	groupcommit.Call
	order *flashsale.Order
	err   error // set by commit
}

// newGroup returns v's queue of orders, committing batches of up to max.
func newGroup(v *flashsale.Voucher, db *store.DB, max int) *groupcommit.Queue[*request] {
	g := &group{voucher: v, db: db}
	return groupcommit.New(groupcommit.Config[*request]{Workers: 1, Max: max, Run: g.commit})
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
			r.err = err
			continue
		}
		switch sales[i] {
		case flashsale.OutcomeInserted:
			*r.order = orders[i]
		case flashsale.OutcomeConflict:
			r.err = g.overLimit(ctx, r.order)
		default:
			r.err = soldOut()
		}
	}
}
