package strategy

import (
	"context"
	"sync"

	"github.com/flashsale/flashsale"
)

// batch answers like conditional — only once the order is committed — but
// commits the concurrent orders of one voucher together (group commit, see
// group.go): first come, first served within a batch; a failed batch fails
// each of its orders, and stores nothing of it.
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
