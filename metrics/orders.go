package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
)

// Orders returns svc with every PlaceOrder counted in
// flashsale_orders_total and timed in flashsale_order_gate_duration_seconds,
// and every CancelOrder and PayOrder counted by outcome (lifecycle.go).
func (m *Metrics) Orders(svc flashsale.OrderService) flashsale.OrderService {
	return &orders{OrderService: svc, m: m}
}

type orders struct {
	flashsale.OrderService
	m *Metrics
}

var _ flashsale.OrderService = (*orders)(nil)

func (o *orders) PlaceOrder(ctx context.Context, req flashsale.OrderRequest) (*flashsale.Order, error) {
	start := time.Now()
	ord, err := o.OrderService.PlaceOrder(ctx, req)
	o.m.gate.WithLabelValues(o.m.strategy).Observe(time.Since(start).Seconds())
	markCounted(ctx)
	o.m.countOrder(req.VoucherID, Outcome(err))
	return ord, err
}

// markCounted tells the HTTP middleware that the request's attempt was
// counted, so that it does not count it again.
func markCounted(ctx context.Context) {
	if n, ok := ctx.Value(noteKey{}).(*note); ok {
		n.counted = true
	}
}

// Persister returns p with every batch's size and time recorded
// (flashsale_async_batch_size, flashsale_async_persist_duration_seconds)
// and every failed attempt counted (flashsale_async_consumer_errors_total).
// A batch short of stock is the consumer's business, not an error.
func (m *Metrics) Persister(p consume.Persister) consume.Persister {
	return &persister{p: p, m: m}
}

type persister struct {
	p consume.Persister
	m *Metrics
}

var _ consume.Persister = (*persister)(nil)

func (p *persister) PersistOrders(ctx context.Context, batch []flashsale.Order) (flashsale.PersistResult, error) {
	start := time.Now()
	res, err := p.p.PersistOrders(ctx, batch)
	switch {
	case err == nil:
		p.m.persistTime.Observe(time.Since(start).Seconds())
		p.m.batchSize.Observe(float64(len(batch)))
	case !errors.Is(err, flashsale.ErrStockShort):
		p.m.persistFails.Inc()
	}
	return res, err
}
