// Package metrics exposes the service's Prometheus metrics (every name
// starts with flashsale_) and keeps the live figures the dashboard shows.
//
// It owns the registry and all Prometheus code: the domain packages know
// nothing of Prometheus. Metrics wraps their interfaces (Orders wraps a
// flashsale.OrderService, Persister a consume.Persister, Middleware the HTTP
// handler) and reads the counters they keep anyway (WatchConsumer reads
// consume.Consumer.Stats, WatchIDs idgen.Slots.Stats) at scrape time.
// Figures that need Redis or MySQL come from a Sampler, which reads them
// every few seconds for a bounded set of vouchers, never per scrape.
//
// Labels stay bounded: HTTP metrics are labelled by the mux pattern, not
// the path; nothing is labelled by user or order; per-voucher gauges exist
// only for the vouchers the Sampler watches.
package metrics

import (
	"net/http"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flashsale/flashsale"
)

// Outcomes are the values of the outcome label of
// flashsale_orders_total, in the order the dashboard shows them.
var Outcomes = outcomes[:]

var outcomes = [...]string{"accepted", "sold_out", "duplicate_order", "limit_reached", "not_started", "ended",
	"rate_limited", "busy", "unavailable", "pass_required", "pass_invalid", "denied", "invalid", "internal"}

// outcomeIndex maps an outcome to its index in Outcomes.
var outcomeIndex = func() map[string]int {
	m := make(map[string]int, len(Outcomes))
	for i, o := range Outcomes {
		m[o] = i
	}
	return m
}()

// Outcome names the outcome of an order attempt that ended with err:
// "accepted" for nil; the waiting room's refusals (pass_required,
// pass_invalid, denied) by their codes, apart from a client's mistakes;
// not_found, unauthorized and forbidden count as invalid (the attempt
// could never succeed as sent).
func Outcome(err error) string {
	switch code := flashsale.ErrorCode(err); code {
	case "":
		return "accepted"
	case flashsale.ESoldOut, flashsale.EDuplicateOrder, flashsale.ELimitReached, flashsale.ENotStarted, flashsale.EEnded,
		flashsale.ERateLimited, flashsale.EBusy, flashsale.EUnavailable, flashsale.EInvalid,
		flashsale.EPassRequired, flashsale.EPassInvalid, flashsale.EDenied:
		return code
	case flashsale.ENotFound, flashsale.EUnauthorized, flashsale.EForbidden:
		return "invalid"
	default:
		return "internal"
	}
}

// Metrics holds the registry and the collectors. It is safe for
// concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	strategy string
	live     *Live

	httpRequests *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	orders       *prometheus.CounterVec
	gate         *prometheus.HistogramVec
	batchSize    prometheus.Histogram
	persistTime  prometheus.Histogram
	persistFails prometheus.Counter
	// An order's life after it is placed (lifecycle.go).
	payments, cancels *prometheus.CounterVec
	expiryLag         prometheus.Histogram
	// The waiting rooms (queue.go), once WatchQueue runs.
	queue *QueueWatch
}

// latencyBuckets suit a service that answers in well under a millisecond
// to a few seconds.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New returns the metrics of a service taking orders with the named
// strategy, with the Go runtime and process collectors and
// flashsale_build_info registered. A process that takes no orders (the
// consumer alone) passes "": its scrape then has no order series.
func New(strategy string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), strategy: strategy, live: NewLive(time.Now)}
	m.httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashsale_http_requests_total", Help: "HTTP requests answered, by route (the mux pattern) and status code.",
	}, []string{"route", "code"})
	m.httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "flashsale_http_request_duration_seconds", Help: "Time to answer an HTTP request, by route.", Buckets: latencyBuckets,
	}, []string{"route"})
	m.orders = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flashsale_orders_total", Help: "Order attempts, by strategy and outcome.",
	}, []string{"strategy", "outcome"})
	m.gate = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "flashsale_order_gate_duration_seconds", Help: "Time the strategy took to decide an order (PlaceOrder), by strategy.", Buckets: latencyBuckets,
	}, []string{"strategy"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "flashsale_async_batch_size", Help: "Orders per batch the consumer persisted in one transaction.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	})
	m.persistTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "flashsale_async_persist_duration_seconds", Help: "Time of one transaction persisting a batch.", Buckets: latencyBuckets,
	})
	m.persistFails = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flashsale_async_consumer_errors_total", Help: "Attempts to persist a batch that failed (MySQL errors; the batch is retried).",
	})
	for _, o := range Outcomes { // every outcome shows, at zero, from the start
		if strategy != "" {
			m.orders.WithLabelValues(strategy, o)
		}
	}
	m.newLifecycle()
	m.reg.MustRegister(m.httpRequests, m.httpDuration, m.orders, m.gate, m.batchSize, m.persistTime, m.persistFails,
		m.payments, m.cancels, m.expiryLag,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	return m
}

// buildInfo returns flashsale_build_info{version,revision}, 1, from the
// binary's build information.
func buildInfo() prometheus.Collector {
	version, revision := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flashsale_build_info", Help: "Always 1; the labels say which build runs.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision},
	})
	g.Set(1)
	return g
}

// Registry returns the registry, to register more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Live returns the live figures the dashboard reads.
func (m *Metrics) Live() *Live { return m.live }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// countOrder records an order attempt's outcome, for Prometheus and for
// the voucher's live figures.
func (m *Metrics) countOrder(voucherID int64, outcome string) {
	m.orders.WithLabelValues(m.strategy, outcome).Inc()
	m.live.Count(voucherID, outcome)
}
