package strategy

import (
	"context"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/groupcommit"
)

// batch answers like conditional — only once the order is committed — but
// commits the concurrent orders of one voucher together (group commit, see
// group.go): first come, first served within a batch; a failed batch fails
// each of its orders, and stores nothing of it.
type batch struct {
	*base
	groups groupcommit.Map[int64, *request] // by voucher id
}

var _ flashsale.OrderService = (*batch)(nil)

// PlaceOrder queues the order in its voucher's group and waits for the
// answer of the batch that takes it. A caller whose ctx ends while the order
// is queued gets ctx's error and the order is dropped, never stored; once a
// batch has taken the order, PlaceOrder returns that batch's answer, also
// when ctx ends meanwhile, so no buyer is told an order failed that the
// database holds (internal/groupcommit's rule). The wait for a batch is
// bounded by batchCommitTimeout.
func (s *batch) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	v, err := s.open(ctx, req)
	if err != nil {
		return nil, err
	}
	o, err := s.newOrder(ctx, v, req)
	if err != nil {
		return nil, err
	}
	r := &request{order: o}
	open := func() *groupcommit.Queue[*request] { return newGroup(v, s.cfg.DB, s.cfg.BatchMax) }
	if err := s.groups.Do(ctx, v.ID, r, open); err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	return o, nil
}
