package strategy

import (
	"context"
	"sync"

	"github.com/flashsale/flashsale"
)

// batch answers like conditional — created only once the order is committed
// in the database — but commits the concurrent orders of one voucher
// together (group commit): one transaction per batch locks the voucher's
// row, stores the orders of new buyers while stock lasts with one multi-row
// insert, and takes that many units in one conditional decrement (see
// store.SellBatch). The hot row is locked and flushed once per batch
// instead of once per order.
//
// Batches form on their own: in each process a voucher's orders queue, and
// one committer per voucher takes everything queued (up to BatchMax) as
// soon as its previous commit ends. An order arriving at an idle voucher is
// committed at once, with no window waited; under load a batch is whatever
// arrived during the previous commit, so batches grow with the load. Several
// processes each commit their own batches; the voucher's row lock runs them
// one after another.
//
// Answers: created (or awaiting_payment) for a buyer served, sold_out for
// one whose turn came after fewer units were left than asked (first come,
// first served within a batch), duplicate_order or limit_reached for a
// buyer whose orders, stored or earlier in the same batch, leave no room. When the batch's transaction fails every order of it gets the
// failure (unavailable when the database is unreachable or the commit runs
// out of time, busy when it kept losing lock races) and nothing of it is
// stored.
type batch struct {
	*base
	groups sync.Map // voucher id → *group
}

var _ flashsale.OrderService = (*batch)(nil)

// PlaceOrder queues the order in its voucher's group and waits for the
// answer of the batch that takes it. A caller whose ctx ends while the order
// is queued gets ctx's error and the order is dropped, never stored; once a
// batch has taken the order, PlaceOrder returns that batch's answer, also
// when ctx ends meanwhile, so no buyer is told an order failed that the
// database holds. The wait for a batch is bounded by batchCommitTimeout.
func (s *batch) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	v, err := s.open(ctx, req)
	if err != nil {
		return nil, err
	}
	o, err := s.newOrder(ctx, v, req)
	if err != nil {
		return nil, err
	}
	g, ok := s.groups.Load(v.ID)
	if !ok {
		g, _ = s.groups.LoadOrStore(v.ID, &group{voucher: v, db: s.cfg.DB, max: s.cfg.BatchMax})
	}
	return g.(*group).place(ctx, o)
}
