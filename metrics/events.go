package metrics

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/store"
)

// OutboxWatch holds the event outbox's metrics (docs/events.md): the
// relay reports each delivery and failure (Delivered, Failed), and Run
// samples the backlog of every sink from MySQL every few seconds.
type OutboxWatch struct {
	backlog, oldest, dead *prometheus.GaugeVec
	delivered, failures   *prometheus.CounterVec
	latency               *prometheus.HistogramVec
}

// eventBuckets suit deliveries from tens of milliseconds to a day of
// retries.
var eventBuckets = []float64{.01, .025, .05, .1, .2, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 86400}

// WatchOutbox registers the outbox's metrics.
func (m *Metrics) WatchOutbox() *OutboxWatch {
	w := &OutboxWatch{
		backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_outbox_backlog_events", Help: "Events not yet delivered, by sink (an upper bound; sink \"sequence\": committed events not yet given a position).",
		}, []string{"sink"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_outbox_oldest_undelivered_seconds", Help: "Age of the oldest event a sink has not had yet (0: none).",
		}, []string{"sink"}),
		dead: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flashsale_events_dead_letters", Help: "Events a webhook endpoint never took, kept until the admin redelivers them, by sink.",
		}, []string{"sink"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_events_delivered_total", Help: "Events delivered by this process, by sink.",
		}, []string{"sink"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flashsale_event_delivery_failures_total", Help: "Failed deliveries by this process (each is retried), by sink.",
		}, []string{"sink"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flashsale_event_delivery_seconds", Help: "From an event's commit to its delivery, by kind of sink (nats, webhook).", Buckets: eventBuckets,
		}, []string{"kind"}),
	}
	m.reg.MustRegister(w.backlog, w.oldest, w.dead, w.delivered, w.failures, w.latency)
	return w
}

// Delivered counts events a sink took.
func (w *OutboxWatch) Delivered(sink string, events []store.OutboxEvent) {
	w.delivered.WithLabelValues(sink).Add(float64(len(events)))
	kind, _, _ := strings.Cut(sink, ":")
	h := w.latency.WithLabelValues(kind)
	now := time.Now()
	for _, e := range events {
		h.Observe(now.Sub(e.OccurredAt).Seconds())
	}
}

// Failed counts a failed delivery.
func (w *OutboxWatch) Failed(sink string, _ error) { w.failures.WithLabelValues(sink).Inc() }

// outboxEvery is how often Run samples the outbox.
const outboxEvery = 5 * time.Second

// Run samples every sink's backlog and the webhooks' dead letters until
// ctx is done: a few index probes per sink, whatever the backlog.
func (w *OutboxWatch) Run(ctx context.Context, db *store.DB, log *slog.Logger) {
	t := time.NewTicker(outboxEvery)
	defer t.Stop()
	for {
		if err := w.sample(ctx, db); err != nil && ctx.Err() == nil {
			log.Warn("metrics: sampling the outbox", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *OutboxWatch) sample(ctx context.Context, db *store.DB) error {
	lags, err := db.OutboxLag(ctx)
	if err != nil {
		return err
	}
	w.backlog.Reset()
	w.oldest.Reset()
	for _, l := range lags {
		w.backlog.WithLabelValues(l.Name).Set(float64(l.Backlog))
		age := 0.0
		if !l.Oldest.IsZero() {
			age = max(time.Since(l.Oldest).Seconds(), 0)
		}
		w.oldest.WithLabelValues(l.Name).Set(age)
	}
	hooks, err := db.Webhooks(ctx)
	if err != nil {
		return err
	}
	w.dead.Reset()
	for _, h := range hooks {
		w.dead.WithLabelValues(store.WebhookCursor(h.ID)).Set(float64(h.DeadLetters))
	}
	return nil
}
