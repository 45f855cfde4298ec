package metrics

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/admission"
)

// QueueReader reads the waiting rooms; *admission.Queue is one.
type QueueReader interface {
	AllStats(ctx context.Context) ([]admission.Stats, error)
}

var _ QueueReader = (*admission.Queue)(nil)

// maxRooms bounds the waiting rooms exported (the newest voucher ids).
const maxRooms = 20

// QueueWatch samples the waiting rooms every few seconds for Prometheus
// and the dashboard: a scrape never touches Redis.
type QueueWatch struct {
	q   QueueReader
	mu  sync.Mutex
	now []admission.Stats
}

// WatchQueue exports the waiting rooms' admission.Stats (per voucher:
// waiting tickets, unused passes, admitted and expired totals, admitted in
// the last second, the ETA of a ticket joining now), sampled every 2 s
// until ctx ends; QueueStats returns the latest sample.
func (m *Metrics) WatchQueue(ctx context.Context, q QueueReader, log *slog.Logger) *QueueWatch {
	w := &QueueWatch{q: q}
	m.queue = w
	m.reg.MustRegister(w)
	go func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			w.sample(ctx, log)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// QueueStats returns the waiting rooms as last sampled (nil without
// WatchQueue), newest voucher first.
func (m *Metrics) QueueStats() []admission.Stats {
	if m.queue == nil {
		return nil
	}
	m.queue.mu.Lock()
	defer m.queue.mu.Unlock()
	return slices.Clone(m.queue.now)
}

func (w *QueueWatch) sample(ctx context.Context, log *slog.Logger) {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s, err := w.q.AllStats(sctx)
	if err != nil {
		if ctx.Err() == nil && log != nil {
			log.WarnContext(ctx, "metrics: reading the waiting rooms", "err", err)
		}
		return
	}
	slices.SortFunc(s, func(a, b admission.Stats) int { return int(b.VoucherID - a.VoucherID) })
	w.mu.Lock()
	w.now = s[:min(len(s), maxRooms)]
	w.mu.Unlock()
}

var (
	voucherLabel   = []string{"voucher"}
	descQueueWait  = prometheus.NewDesc("flashsale_queue_waiting", "Tickets waiting in a voucher's waiting room.", voucherLabel, nil)
	descQueuePass  = prometheus.NewDesc("flashsale_queue_unused_passes", "Live purchase passes not used yet.", voucherLabel, nil)
	descQueueAdm   = prometheus.NewDesc("flashsale_queue_admitted_total", "Buyers admitted (passes handed out).", voucherLabel, nil)
	descQueueExp   = prometheus.NewDesc("flashsale_queue_expired_total", "Passes that ran out unused.", voucherLabel, nil)
	descQueueRate  = prometheus.NewDesc("flashsale_queue_admitted_last_second", "Passes handed out in the last second (Redis's clock).", voucherLabel, nil)
	descQueueETA   = prometheus.NewDesc("flashsale_queue_eta_seconds", "Estimated wait of a ticket joining now; absent when it would be beyond the units still to be admitted.", voucherLabel, nil)
	descQueueAhead = prometheus.NewDesc("flashsale_queue_units_ahead", "Units still to be admitted: left, less the passes out and the orders being placed.", voucherLabel, nil)
	descQueueLimit = prometheus.NewDesc("flashsale_queue_admit_per_second", "The voucher's admit_per_second.", voucherLabel, nil)
)

// Describe implements prometheus.Collector.
func (w *QueueWatch) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueueWait, descQueuePass, descQueueAdm, descQueueExp, descQueueRate, descQueueETA, descQueueAhead, descQueueLimit} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (w *QueueWatch) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.now {
		id := strconv.FormatInt(s.VoucherID, 10)
		ch <- prometheus.MustNewConstMetric(descQueueWait, prometheus.GaugeValue, float64(s.Waiting), id)
		ch <- prometheus.MustNewConstMetric(descQueuePass, prometheus.GaugeValue, float64(s.Unused), id)
		ch <- prometheus.MustNewConstMetric(descQueueAdm, prometheus.CounterValue, float64(s.Admitted), id)
		ch <- prometheus.MustNewConstMetric(descQueueExp, prometheus.CounterValue, float64(s.Expired), id)
		ch <- prometheus.MustNewConstMetric(descQueueRate, prometheus.GaugeValue, float64(s.AdmittedLastSecond), id)
		if s.ETASeconds != nil { // none for a ticket beyond the units still to be admitted
			ch <- prometheus.MustNewConstMetric(descQueueETA, prometheus.GaugeValue, float64(*s.ETASeconds), id)
		}
		ch <- prometheus.MustNewConstMetric(descQueueAhead, prometheus.GaugeValue, float64(s.UnitsAhead), id)
		ch <- prometheus.MustNewConstMetric(descQueueLimit, prometheus.GaugeValue, float64(s.Rate), id)
	}
}
