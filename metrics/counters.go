package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/idgen"
)

// WatchConsumer exports the consumer's counters (consume.Stats),
// read at scrape time.
func (m *Metrics) WatchConsumer(c *consume.Consumer) {
	m.reg.MustRegister(newCounterSet([]counterSpec{
		{"flashsale_async_orders_persisted_total", "Orders the consumer inserted into MySQL."},
		{"flashsale_async_orders_already_present_total", "Orders the consumer found in MySQL already (redeliveries)."},
		{"flashsale_async_entries_claimed_total", "Stream entries taken over from other consumers."},
		{"flashsale_async_dead_letters_total", "Stream entries moved to a dead-letter stream."},
		{"flashsale_async_persist_retries_total", "Failed attempts to persist a batch, retried."},
		{"flashsale_async_batches_total", "Transactions that persisted a batch."},
		{"flashsale_async_entries_lost_total", "Pending stream entries deleted before they were persisted."},
		{"flashsale_async_entries_claimed_dead_total", "Stream entries taken over from consumers whose heartbeat had stopped (they died)."},
		{"flashsale_async_unknown_voucher_total", "Batches left pending because this consumer's database has no such voucher: a configuration error (another database's Redis prefix)."},
		{"flashsale_async_unreplicated_total", "Batches left pending because the replicas durability replica asks for did not confirm them (a partition or a lagging replica)."},
	}, func() []uint64 {
		s := c.Stats()
		return []uint64{s.Persisted, s.AlreadyPresent, s.Claimed, s.DeadLettered, s.Retries, s.Batches, s.Lost, s.ClaimedDead, s.UnknownVoucher, s.Unreplicated}
	}))
}

// WatchIDs exports the ID generator's counters (idgen.Stats), read at
// scrape time: an idgen.Generator's or idgen.Slots'.
func (m *Metrics) WatchIDs(g interface{ Stats() idgen.Stats }) {
	m.reg.MustRegister(newCounterSet([]counterSpec{
		{"flashsale_idgen_range_fetches_total", "Range allocations run against Redis, failed ones included."},
		{"flashsale_idgen_range_fetch_failures_total", "Range allocations that failed."},
		{"flashsale_idgen_ids_total", "IDs handed out."},
		{"flashsale_idgen_waits_total", "ID requests that found the local ranges used up and waited for Redis."},
		{"flashsale_idgen_resets_total", "Times the Redis counter was found missing and recreated."},
	}, func() []uint64 {
		s := g.Stats()
		return []uint64{s.RoundTrips, s.Failures, s.IDs, s.Waits, s.Resets}
	}))
}

// counterSpec names one counter of a counterSet.
type counterSpec struct{ name, help string }

// counterSet exports counters a component keeps itself: read returns
// their values, in the order of the specs, in one call per scrape.
type counterSet struct {
	descs []*prometheus.Desc
	read  func() []uint64
}

func newCounterSet(specs []counterSpec, read func() []uint64) *counterSet {
	cs := &counterSet{read: read}
	for _, s := range specs {
		cs.descs = append(cs.descs, prometheus.NewDesc(s.name, s.help, nil, nil))
	}
	return cs
}

func (cs *counterSet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range cs.descs {
		ch <- d
	}
}

func (cs *counterSet) Collect(ch chan<- prometheus.Metric) {
	for i, v := range cs.read() {
		ch <- prometheus.MustNewConstMetric(cs.descs[i], prometheus.CounterValue, float64(v))
	}
}
