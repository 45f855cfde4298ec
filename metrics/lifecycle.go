package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lifecycle"
)

// The metrics of an order's life after it is placed: payments and cancels
// by outcome, how late orders expire, and what the lifecycle service gave
// back. The per-voucher counts of orders by status come from the Sampler.

// PaymentRoute and CancelRoute are the mux patterns of the payment
// webhook and of the cancel route, as httpapi registers them.
const (
	PaymentRoute = "POST /api/payments"
	CancelRoute  = "POST /api/orders/{id}/cancel"
)

// Outcomes of a payment or a cancel that succeeded; a refused one is
// labelled with its error code.
const (
	paid      = "paid"
	cancelled = "cancelled"
)

// expiryBuckets suit an expirer that runs every 100 ms and may fall
// minutes behind while MySQL is down.
var expiryBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

func (m *Metrics) newLifecycle() {
	m.payments = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashsale_payments_total", Help: "Calls of the payment webhook, by outcome: paid (a replay of a payment too), or the code of the refusal (unauthorized: a bad signature).",
	}, []string{"outcome"})
	m.cancels = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashsale_cancels_total", Help: "Cancel requests, by outcome: cancelled (a repeated cancel too), or the code of the refusal.",
	}, []string{"outcome"})
	m.expiryLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "flashsale_order_expiry_lag_seconds", Help: "How long after its pay_by an order was expired by this process's expirer (its units go back on sale then).", Buckets: expiryBuckets,
	})
	if m.strategy == "" { // takes no orders
		return
	}
	for _, o := range []string{paid, flashsale.EAlreadyPaid, flashsale.EOrderClosed, flashsale.EInvalid, flashsale.EUnauthorized} {
		m.payments.WithLabelValues(o)
	}
	for _, o := range []string{cancelled, flashsale.EAlreadyPaid, flashsale.EOrderClosed, flashsale.ENotFound} {
		m.cancels.WithLabelValues(o)
	}
}

// CancelOrder counts the cancel in flashsale_cancels_total.
func (o *orders) CancelOrder(ctx context.Context, id, userID int64) (*flashsale.Order, error) {
	ord, err := o.OrderService.CancelOrder(ctx, id, userID)
	markCounted(ctx)
	o.m.cancels.WithLabelValues(lifeOutcome(cancelled, err)).Inc()
	return ord, err
}

// PayOrder counts the payment in flashsale_payments_total.
func (o *orders) PayOrder(ctx context.Context, p flashsale.Payment) (*flashsale.Order, error) {
	ord, err := o.OrderService.PayOrder(ctx, p)
	markCounted(ctx)
	o.m.payments.WithLabelValues(lifeOutcome(paid, err)).Inc()
	return ord, err
}

// lifeOutcome names the outcome of a payment or cancel that ended with
// err: done for nil, else the error's code.
func lifeOutcome(done string, err error) string {
	if code := flashsale.ErrorCode(err); code != "" {
		return code
	}
	return done
}

// countLife counts a payment or cancel request the order service never
// saw (a bad signature, a malformed id) by the code its status stands for.
func (m *Metrics) countLife(route string, status int) {
	code := statusCode(status)
	switch route {
	case PaymentRoute:
		m.payments.WithLabelValues(code).Inc()
	case CancelRoute:
		m.cancels.WithLabelValues(code).Inc()
	}
}

// statusCode returns the error code a status of the API stands for.
func statusCode(status int) string {
	switch status {
	case http.StatusBadRequest:
		return flashsale.EInvalid
	case http.StatusUnauthorized:
		return flashsale.EUnauthorized
	case http.StatusNotFound:
		return flashsale.ENotFound
	case http.StatusTooManyRequests:
		return flashsale.ERateLimited
	case http.StatusServiceUnavailable:
		return flashsale.EUnavailable
	}
	return flashsale.EInternal
}

// ObserveExpiryLag records how late one order expired after its pay_by:
// lifecycle.ExpirerConfig.ObserveLag.
func (m *Metrics) ObserveExpiryLag(d time.Duration) {
	m.expiryLag.Observe(max(d, 0).Seconds())
}

// WatchLifecycle exports the lifecycle service's counters
// (lifecycle.Stats), read at scrape time.
func (m *Metrics) WatchLifecycle(l *lifecycle.Service) {
	m.reg.MustRegister(newCounterSet([]counterSpec{
		{"flashsale_orders_expired_total", "Orders this process expired at their pay_by."},
		{"flashsale_returned_units_total", "Units of cancelled and expired orders this process put back on sale."},
		{"flashsale_returns_swept_total", "Orders whose return another process left pending, finished by this one's sweep."},
	}, func() []uint64 {
		s := l.Stats()
		return []uint64{uint64(s.Expired), uint64(s.Returned), uint64(s.Swept)}
	}))
}
