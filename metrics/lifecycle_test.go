package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lifecycle"
)

// lifeSvc cancels and pays orders with a lifecycle service.
type lifeSvc struct {
	orderSvc
	life *lifecycle.Service
}

func (s lifeSvc) CancelOrder(ctx context.Context, id, userID int64) (*flashsale.Order, error) {
	return s.life.CancelOrder(ctx, id, userID)
}

func (s lifeSvc) PayOrder(ctx context.Context, p flashsale.Payment) (*flashsale.Order, error) {
	return s.life.PayOrder(ctx, p)
}

// value returns the value of the gathered metric with the labels, and
// whether there is one: a counter's or a gauge's value, a histogram's
// count.
func value(t *testing.T, m *Metrics, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, metric := range f.GetMetric() {
			n := 0
			for _, l := range metric.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					n++
				}
			}
			if n == len(labels) {
				switch {
				case metric.Counter != nil:
					return metric.Counter.GetValue(), true
				case metric.Gauge != nil:
					return metric.Gauge.GetValue(), true
				case metric.Histogram != nil:
					return float64(metric.Histogram.GetSampleCount()), true
				}
			}
		}
	}
	return 0, false
}

// TestLifecycleMetrics pays, cancels and expires orders in a real MySQL
// through the Orders decorator and the middleware, and reads them back:
// payments and cancels by outcome (also those refused before the service,
// by their status), the expiry lag, the lifecycle service's returns, and
// the sampler's orders by status per voucher.
func TestLifecycleMetrics(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	now := time.Now().UTC().Truncate(time.Second)
	v := &flashsale.Voucher{ID: 1, Title: "v", Stock: 10, PayValue: 100, LimitPerBuyer: 2, PaymentWindowSeconds: 3600,
		BeginTime: now.Add(-time.Minute), EndTime: now.Add(time.Hour)}
	if err := db.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	orders := []flashsale.Order{ // to pay, to cancel, to expire, left awaiting payment
		{ID: 11, VoucherID: 1, UserID: 1, Quantity: 1, PayBy: now.Add(time.Hour)},
		{ID: 12, VoucherID: 1, UserID: 2, Quantity: 2, PayBy: now.Add(time.Hour)},
		{ID: 13, VoucherID: 1, UserID: 3, Quantity: 1, PayBy: now.Add(time.Second)},
		{ID: 14, VoucherID: 1, UserID: 4, Quantity: 1, PayBy: now.Add(time.Hour)},
	}
	if _, err := db.SellBatch(ctx, 1, orders); err != nil {
		t.Fatal(err)
	}
	var ahead atomic.Int64
	life := lifecycle.New(db, lifecycle.Config{Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	m := New("conditional")
	m.WatchLifecycle(life)
	svc := m.Orders(lifeSvc{life: life})

	// The webhook refuses a request without a signature before the
	// service; one with a signature gets there.
	mux := http.NewServeMux()
	mux.HandleFunc(PaymentRoute, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Signature") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if _, err := svc.PayOrder(r.Context(), flashsale.Payment{ID: "p1", OrderID: 11, Amount: 100}); err != nil {
			w.WriteHeader(http.StatusConflict)
		}
	})
	srv := httptest.NewServer(m.Middleware(mux))
	t.Cleanup(srv.Close)
	for _, sig := range []string{"", "x", "x"} { // the second payment is the first again
		req, _ := http.NewRequest("POST", srv.URL+"/api/payments", nil)
		if sig != "" {
			req.Header.Set("Signature", sig)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	for _, p := range []flashsale.Payment{{ID: "p2", OrderID: 11, Amount: 100}, {ID: "p3", OrderID: 14, Amount: 99}} {
		_, _ = svc.PayOrder(ctx, p) // already_paid, invalid
	}
	for _, c := range []struct{ id, user int64 }{{12, 2}, {12, 2}, {11, 1}, {14, 9}} {
		_, _ = svc.CancelOrder(ctx, c.id, c.user) // cancelled twice, already_paid, not_found
	}
	_, _ = svc.PayOrder(ctx, flashsale.Payment{ID: "p4", OrderID: 12, Amount: 200}) // order_closed
	ahead.Store(int64(3 * time.Second))
	if err := life.ExpireDue(ctx, lifecycle.ExpirerConfig{ObserveLag: m.ObserveExpiryLag}); err != nil {
		t.Fatal(err)
	}
	sampler := NewSampler(SamplerConfig{DB: db})
	m.Watch(sampler)
	if err := sampler.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"flashsale_payments_total", map[string]string{"outcome": "unauthorized"}, 1},
		{"flashsale_payments_total", map[string]string{"outcome": "paid"}, 2},
		{"flashsale_payments_total", map[string]string{"outcome": "already_paid"}, 1},
		{"flashsale_payments_total", map[string]string{"outcome": "invalid"}, 1},
		{"flashsale_payments_total", map[string]string{"outcome": "order_closed"}, 1},
		{"flashsale_cancels_total", map[string]string{"outcome": "cancelled"}, 2},
		{"flashsale_cancels_total", map[string]string{"outcome": "already_paid"}, 1},
		{"flashsale_cancels_total", map[string]string{"outcome": "not_found"}, 1},
		{"flashsale_cancels_total", map[string]string{"outcome": "order_closed"}, 0},
		{"flashsale_order_expiry_lag_seconds", nil, 1},
		{"flashsale_orders_expired_total", nil, 1},
		{"flashsale_returned_units_total", nil, 3}, // a cancel sent again returns nothing
		{"flashsale_returns_swept_total", nil, 0},
		{"flashsale_voucher_orders_by_status", map[string]string{"voucher": "1", "status": "paid"}, 1},
		{"flashsale_voucher_orders_by_status", map[string]string{"voucher": "1", "status": "awaiting_payment"}, 1},
		{"flashsale_voucher_orders_by_status", map[string]string{"voucher": "1", "status": "cancelled"}, 1},
		{"flashsale_voucher_orders_by_status", map[string]string{"voucher": "1", "status": "expired"}, 1},
		{"flashsale_voucher_orders_by_status", map[string]string{"voucher": "1", "status": "created"}, 0},
		{"flashsale_voucher_returned_units", map[string]string{"voucher": "1"}, 3},
		{"flashsale_voucher_returns_pending", map[string]string{"voucher": "1"}, 0},
		{"flashsale_voucher_paid_after_close", map[string]string{"voucher": "1"}, 0},
		{"flashsale_voucher_remaining", map[string]string{"voucher": "1", "store": "mysql"}, 8},
		{"flashsale_voucher_stock_drift", map[string]string{"voucher": "1", "check": "mysql"}, 0},
		{"flashsale_voucher_oversold", map[string]string{"voucher": "1"}, 0},
	} {
		if got, ok := value(t, m, tc.name, tc.labels); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present: %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	s := sampler.Latest().Vouchers[0]
	if s.Orders != 2 || s.Units != 2 || s.Paid != 1 || s.AwaitingPayment != 1 || s.Returned != 3 {
		t.Errorf("sample %+v; want 2 live orders of 1 unit, 1 paid, 1 awaiting, 3 units returned", s)
	}
	if problems, err := testutil.GatherAndLint(m.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestSamplerCountsUnits sells orders of several units: the voucher's
// drift and oversold count units, not orders.
func TestSamplerCountsUnits(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	v := &flashsale.Voucher{ID: 1, Title: "v", Stock: 10, LimitPerBuyer: 5, BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := db.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SellBatch(ctx, 1, []flashsale.Order{{ID: 11, VoucherID: 1, UserID: 1, Quantity: 5}, {ID: 12, VoucherID: 1, UserID: 2, Quantity: 4}}); err != nil {
		t.Fatal(err)
	}
	s := NewSampler(SamplerConfig{DB: db})
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Latest().Vouchers[0]; got.RemainingMySQL != 1 || got.Orders != 2 || got.Units != 9 || got.MySQLDrift != 0 || got.Oversold != 0 {
		t.Errorf("sample %+v; want 1 left, 2 orders of 9 units, no drift", got)
	}
}
