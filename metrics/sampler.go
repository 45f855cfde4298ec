package metrics

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/store"
)

// SamplerConfig configures a Sampler. DB is required; without Redis the
// samples hold MySQL's side only.
type SamplerConfig struct {
	DB    *store.DB
	Redis rueidis.Client
	// Prefix and Group are the async pipeline's (defaults: async's).
	Prefix, Group string
	// Every is how often Run samples (default 2s).
	Every time.Duration
	// Limit bounds the vouchers watched (default 20): the latest to begin
	// among those whose sale ended less than Recent ago (default 10m),
	// plus those with an open stream in Redis, up to Limit more.
	Limit  int
	Recent time.Duration
	// Live, when set, forgets the vouchers no longer watched.
	Live   *Live
	Logger *slog.Logger
}

// Sampler reads, every few seconds, the figures of the vouchers on sale
// (and those with orders still in flight) from MySQL and Redis, and keeps
// the latest for the dashboard and for Prometheus, and a short history of
// each voucher for the dashboard's chart. A scrape never touches the
// servers. It is safe for concurrent use.
type Sampler struct {
	cfg SamplerConfig

	mu      sync.Mutex
	last    Sample
	history map[int64][]Point
	sold    map[int64]time.Time // when each voucher's stock last fell
	audits  map[int64]audited   // each voucher's last audit
}

// Sample is what one pass read.
type Sample struct {
	At       time.Time       `json:"sampled_at"`
	Vouchers []VoucherSample `json:"vouchers"`
	Err      string          `json:"error,omitempty"`
}

// VoucherSample is one voucher's figures. Pointers are nil when the
// figure does not exist: a voucher not loaded in Redis (a synchronous
// strategy's) has no Redis side, and a voucher without an open stream no
// backlog.
type VoucherSample struct {
	ID        int64     `json:"id,string"`
	Title     string    `json:"title"`
	Stock     int       `json:"stock"`
	BeginTime time.Time `json:"begin_time"`
	EndTime   time.Time `json:"end_time"`
	// PaymentWindowSeconds is the voucher's payment window (0: none, and
	// no order awaits payment, is paid, cancelled or expires).
	PaymentWindowSeconds int `json:"payment_window_seconds"`
	// From MySQL: remaining stock, orders holding stock and their units.
	RemainingMySQL int `json:"remaining_mysql"`
	Orders         int `json:"orders"`
	Units          int `json:"units"`
	// From MySQL, an order's life: orders by status (of the live ones,
	// Paid and AwaitingPayment; an async order is counted once
	// persisted), the units of cancelled and expired orders (Returned),
	// the closed orders whose return is not done yet, and those that
	// carry a payment (which must stay 0).
	Paid            int `json:"paid"`
	AwaitingPayment int `json:"awaiting_payment"`
	Cancelled       int `json:"cancelled"`
	Expired         int `json:"expired"`
	Returned        int `json:"returned"`
	ReturnsPending  int `json:"returns_pending"`
	PaidAfterClose  int `json:"paid_after_close"`
	// From Redis.
	RemainingRedis *int   `json:"remaining_redis"`
	Backlog        *int64 `json:"backlog,omitempty"`
	DeadLetters    *int   `json:"dead_letters,omitempty"`
	// Oversold is how many more units were sold than the stock, in MySQL
	// or in Redis: it must stay 0. MySQLDrift is remaining + units −
	// stock in MySQL (negative: lost stock updates); RedisDrift is Redis's
	// stock + backlog − MySQL's remaining (0 when every unit Redis took is
	// in MySQL or on its way; negative after a dead letter until
	// reconciliation gives its unit back). Both should be 0; a sample
	// taken while orders move can be off by a few for one pass.
	Oversold   int  `json:"oversold"`
	MySQLDrift int  `json:"mysql_drift"`
	RedisDrift *int `json:"redis_drift,omitempty"`
	// LastSold is when a pass last saw the stock fall, in Redis or in
	// MySQL. A voucher first seen with units sold counts as sold at the
	// earlier of that pass and its end (they sold by then). Zero while
	// none has sold.
	LastSold time.Time `json:"last_sold,omitzero"`
}

// Point is one sample of a voucher, for its chart.
type Point struct {
	Time           int64  `json:"t"` // Unix seconds
	RemainingMySQL int    `json:"remaining_mysql"`
	RemainingRedis *int   `json:"remaining_redis"`
	Backlog        *int64 `json:"backlog,omitempty"`
}

// historyLen is how many points a voucher's history keeps (10 minutes at
// the default 2s).
const historyLen = 300

// NewSampler returns a Sampler; call Run to sample.
func NewSampler(cfg SamplerConfig) *Sampler {
	cfg.Every = cmp.Or(cfg.Every, 2*time.Second)
	cfg.Limit = cmp.Or(cfg.Limit, 20)
	cfg.Recent = cmp.Or(cfg.Recent, 10*time.Minute)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sampler{cfg: cfg, history: map[int64][]Point{}, sold: map[int64]time.Time{}, audits: map[int64]audited{}}
}

// Run samples every Every until ctx is done.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Every)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, max(s.cfg.Every, time.Second))
		if err := s.Refresh(sctx); err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("metrics: sampling the vouchers failed", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Latest returns the last sample.
func (s *Sampler) Latest() Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// History returns the voucher's points, oldest first.
func (s *Sampler) History(voucherID int64) []Point {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.history[voucherID])
}

// Refresh takes one sample now. On an error the last good figures stay,
// with the error noted.
func (s *Sampler) Refresh(ctx context.Context) error {
	now := time.Now()
	vs, err := s.sample(ctx, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.last.Err = err.Error()
		return err
	}
	keep := make(map[int64]bool, len(vs))
	for i := range vs {
		keep[vs[i].ID] = true
		s.track(&vs[i], now)
	}
	s.last = Sample{At: now, Vouchers: vs}
	for id := range s.history {
		if !keep[id] {
			delete(s.history, id)
			delete(s.sold, id)
		}
	}
	for id := range s.audits {
		if !keep[id] {
			delete(s.audits, id)
		}
	}
	if s.cfg.Live != nil {
		s.cfg.Live.Keep(keep)
	}
	return nil
}

// track appends v's figures to its history and sets v.LastSold. s.mu
// must be held.
func (s *Sampler) track(v *VoucherSample, now time.Time) {
	p := Point{Time: now.Unix(), RemainingMySQL: v.RemainingMySQL, RemainingRedis: v.RemainingRedis, Backlog: v.Backlog}
	h := s.history[v.ID]
	switch {
	case len(h) > 0 && fell(h[len(h)-1], p):
		s.sold[v.ID] = now
	case len(h) == 0 && fell(Point{RemainingMySQL: v.Stock, RemainingRedis: &v.Stock}, p):
		s.sold[v.ID] = now // sold by now, and by the sale's end
		if v.EndTime.Before(now) {
			s.sold[v.ID] = v.EndTime
		}
	}
	v.LastSold = s.sold[v.ID]
	h = append(h, p)
	s.history[v.ID] = h[max(0, len(h)-historyLen):]
}

// fell reports whether the stock fell from a to b, in MySQL or in Redis.
func fell(a, b Point) bool {
	return b.RemainingMySQL < a.RemainingMySQL ||
		a.RemainingRedis != nil && b.RemainingRedis != nil && *b.RemainingRedis < *a.RemainingRedis
}

// sample reads the watched vouchers' figures: Redis first, then MySQL, so
// an order in flight is counted in the backlog rather than missed.
func (s *Sampler) sample(ctx context.Context, now time.Time) ([]VoucherSample, error) {
	recent, err := s.cfg.DB.RecentVouchers(ctx, now.Add(-s.cfg.Recent), s.cfg.Limit)
	if err != nil {
		return nil, err
	}
	vs := make([]VoucherSample, 0, len(recent))
	seen := map[int64]bool{}
	for _, v := range recent {
		seen[v.ID] = true
		vs = append(vs, VoucherSample{ID: v.ID, Title: v.Title, Stock: v.Stock, BeginTime: v.BeginTime, EndTime: v.EndTime,
			PaymentWindowSeconds: v.PaymentWindowSeconds})
	}
	open := map[int64]bool{}
	if s.cfg.Redis != nil {
		ids, err := async.Registered(ctx, s.cfg.Redis, s.cfg.Prefix)
		if err != nil {
			return nil, err
		}
		slices.Sort(ids)
		for _, id := range ids[max(0, len(ids)-s.cfg.Limit):] {
			open[id] = true
			if !seen[id] { // a past sale still draining
				vs = append(vs, VoucherSample{ID: id})
			}
		}
	}
	out := vs[:0]
	for _, v := range vs {
		if err := s.voucher(ctx, &v, open[v.ID]); err != nil {
			return nil, err
		}
		if v.Title != "" || v.Stock > 0 { // gone from MySQL: skip
			out = append(out, v)
		}
	}
	return out, nil
}

// voucher fills in one voucher's figures.
func (s *Sampler) voucher(ctx context.Context, v *VoucherSample, open bool) error {
	var st async.State
	if s.cfg.Redis != nil {
		var err error
		if st, err = async.ReadState(ctx, s.cfg.Redis, s.cfg.Prefix, v.ID); err != nil {
			return err
		}
		if open {
			n, err := async.VoucherBacklog(ctx, s.cfg.Redis, s.cfg.Prefix, s.cfg.Group, v.ID)
			if err != nil {
				return err
			}
			v.Backlog = &n
		}
	}
	row, err := s.cfg.DB.Voucher(ctx, v.ID) // read after Redis: see sample
	if err != nil {
		return nil // deleted: the caller skips it
	}
	if v.Title == "" {
		v.Title, v.Stock, v.BeginTime, v.EndTime, v.PaymentWindowSeconds = row.Title, row.Stock, row.BeginTime, row.EndTime, row.PaymentWindowSeconds
	}
	a, err := s.audit(ctx, v.ID)
	if err != nil {
		return err
	}
	v.RemainingMySQL, v.Orders, v.Units = row.Remaining, a.Orders, a.Units
	v.Paid, v.AwaitingPayment, v.Cancelled, v.Expired = a.Paid, a.AwaitingPayment, a.Cancelled, a.Expired
	v.Returned, v.ReturnsPending, v.PaidAfterClose = a.ReturnedUnits, a.ReturnsPending, a.PaidAfterClose
	v.MySQLDrift = a.Remaining + a.Units - a.Stock
	v.Oversold = max(0, a.Units-a.Stock)
	if st.Loaded {
		stock, dead := st.Stock, st.DeadLetters
		v.RemainingRedis, v.DeadLetters = &stock, &dead
		if st.Held >= 0 { // counted: a limit of 1 (HLEN)
			v.Oversold = max(v.Oversold, st.Held-st.InitialStock)
		}
		drift := stock - row.Remaining
		if v.Backlog != nil {
			drift += int(*v.Backlog)
		}
		v.RedisDrift = &drift
	}
	return nil
}

// Watch registers the sampler's figures with m, as per-voucher gauges
// read from the last sample.
func (m *Metrics) Watch(s *Sampler) { m.reg.MustRegister(samplerCollector{s}) }

var (
	descRemaining = prometheus.NewDesc("flashsale_voucher_remaining", "Stock left, by voucher and store (redis, mysql).", []string{"voucher", "store"}, nil)
	descOrders    = prometheus.NewDesc("flashsale_voucher_orders", "Orders in MySQL that hold stock, by voucher.", []string{"voucher"}, nil)
	descOversold  = prometheus.NewDesc("flashsale_voucher_oversold", "Units sold beyond the stock, in MySQL or Redis; must be 0.", []string{"voucher"}, nil)
	descDrift     = prometheus.NewDesc("flashsale_voucher_stock_drift", "Stock that does not add up, by voucher and check: mysql (remaining + orders - stock), redis (Redis stock + backlog - MySQL remaining).", []string{"voucher", "check"}, nil)
	descBacklog   = prometheus.NewDesc("flashsale_async_backlog", "Accepted orders of the voucher's stream not persisted yet (vouchers with an open stream only).", []string{"voucher"}, nil)
	descDead      = prometheus.NewDesc("flashsale_async_dead_letters", "Entries in the voucher's dead-letter stream.", []string{"voucher"}, nil)
	descSampled   = prometheus.NewDesc("flashsale_voucher_sample_timestamp_seconds", "When the voucher figures were last read from Redis and MySQL.", nil, nil)
	descStatus    = prometheus.NewDesc("flashsale_voucher_orders_by_status", "Orders in MySQL by voucher and status (created, awaiting_payment, paid, cancelled, expired).", []string{"voucher", "status"}, nil)
	descReturned  = prometheus.NewDesc("flashsale_voucher_returned_units", "Units of the voucher's cancelled and expired orders, given back to its stock.", []string{"voucher"}, nil)
	descPending   = prometheus.NewDesc("flashsale_voucher_returns_pending", "Closed orders of the voucher whose units are not back on sale yet (the sweep finishes them within seconds).", []string{"voucher"}, nil)
	descPaidLate  = prometheus.NewDesc("flashsale_voucher_paid_after_close", "Cancelled or expired orders of the voucher that carry a payment; must be 0.", []string{"voucher"}, nil)
)

// samplerCollector exports a Sampler's last sample.
type samplerCollector struct{ s *Sampler }

func (c samplerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRemaining, descOrders, descOversold, descDrift, descBacklog, descDead, descSampled,
		descStatus, descReturned, descPending, descPaidLate} {
		ch <- d
	}
}

func (c samplerCollector) Collect(ch chan<- prometheus.Metric) {
	last := c.s.Latest()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if !last.At.IsZero() {
		gauge(descSampled, float64(last.At.UnixMilli())/1000)
	}
	for _, v := range last.Vouchers {
		id := strconv.FormatInt(v.ID, 10)
		gauge(descRemaining, float64(v.RemainingMySQL), id, "mysql")
		gauge(descOrders, float64(v.Orders), id)
		gauge(descOversold, float64(v.Oversold), id)
		gauge(descDrift, float64(v.MySQLDrift), id, "mysql")
		for status, n := range map[string]int{"created": v.Orders - v.Paid - v.AwaitingPayment, "awaiting_payment": v.AwaitingPayment,
			"paid": v.Paid, "cancelled": v.Cancelled, "expired": v.Expired} {
			gauge(descStatus, float64(n), id, status)
		}
		gauge(descReturned, float64(v.Returned), id)
		gauge(descPending, float64(v.ReturnsPending), id)
		gauge(descPaidLate, float64(v.PaidAfterClose), id)
		if v.RemainingRedis != nil {
			gauge(descRemaining, float64(*v.RemainingRedis), id, "redis")
			gauge(descDead, float64(*v.DeadLetters), id)
			gauge(descDrift, float64(*v.RedisDrift), id, "redis")
		}
		if v.Backlog != nil {
			gauge(descBacklog, float64(*v.Backlog), id)
		}
	}
}
