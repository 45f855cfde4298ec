package dashboard

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/store"
)

// TestEndpoints serves the page over vouchers in a real MySQL, one
// upcoming, one ended, one on sale with an order: the list badges each and
// names the one on sale as current, and a voucher's stats carry its own
// status and latency. (httpapi's tests check the JSON against
// openapi.json.)
func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	at := time.Now()
	for _, v := range []flashsale.Voucher{
		{ID: 1, BeginTime: at.Add(time.Hour), EndTime: at.Add(2 * time.Hour)},
		{ID: 2, BeginTime: at.Add(-40 * time.Second), EndTime: at.Add(-10 * time.Second)},
		{ID: 3, BeginTime: at.Add(-time.Minute), EndTime: at.Add(time.Hour)},
	} {
		v.Title, v.Stock = "v", 5
		if err := db.CreateVoucher(ctx, &v); err != nil {
			t.Fatal(err)
		}
	}
	// Voucher 3 sold one order without a payment step, and three with
	// one: one paid, one cancelled, one awaiting payment.
	payBy := at.Add(time.Hour)
	if _, err := db.SellBatch(ctx, 3, []flashsale.Order{{ID: 10, VoucherID: 3, UserID: 10},
		{ID: 11, VoucherID: 3, UserID: 11, PayBy: payBy}, {ID: 12, VoucherID: 3, UserID: 12, PayBy: payBy}, {ID: 13, VoucherID: 3, UserID: 13, PayBy: payBy}}); err != nil {
		t.Fatal(err)
	}
	life := lifecycle.New(db, lifecycle.Config{})
	if _, err := life.PayOrder(ctx, flashsale.Payment{ID: "p", OrderID: 11}); err != nil {
		t.Fatal(err)
	}
	if _, err := life.CancelOrder(ctx, 12, 12); err != nil {
		t.Fatal(err)
	}
	live := metrics.NewLive(time.Now)
	for range 3 {
		live.Latency(3, 10*time.Millisecond)
	}
	live.Latency(2, time.Second)
	s := metrics.NewSampler(metrics.SamplerConfig{DB: db, Live: live})
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	(&Dashboard{Sampler: s, Live: live, IsAdmin: func(r *http.Request) bool { return r.Header.Get("Authorization") == "admin" }}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	page, err := http.Get(srv.URL + "/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if csp := page.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || page.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the page may be framed: CSP %q, X-Frame-Options %q", csp, page.Header.Get("X-Frame-Options"))
	}

	var list struct {
		Vouchers []struct{ ID, Status string }
		Current  string
	}
	get(t, srv.URL+"/api/stats", "", &list)
	statuses := map[string]string{}
	for _, v := range list.Vouchers {
		statuses[v.ID] = v.Status
	}
	if want := map[string]string{"1": upcoming, "2": ended, "3": onSale}; len(statuses) != 3 ||
		statuses["1"] != want["1"] || statuses["2"] != want["2"] || statuses["3"] != want["3"] || list.Current != "3" {
		t.Errorf("/api/stats: statuses %v, current %q; want %v, current 3", statuses, list.Current, want)
	}
	for _, token := range []string{"", "admin"} {
		var stats struct {
			Voucher struct {
				Status                 string
				Orders, Paid, Returned int
				AwaitingPayment        int `json:"awaiting_payment"`
			}
			Latency struct {
				P50, P99 float64
				Requests int64
			} `json:"latency_ms"`
		}
		get(t, srv.URL+"/api/vouchers/3/stats", token, &stats)
		if stats.Voucher.Status != onSale || stats.Latency.Requests != 3 || math.Abs(stats.Latency.P50-10) > 10.0/16 || math.Abs(stats.Latency.P99-10) > 10.0/16 {
			t.Errorf("stats of voucher 3 (token %q): %+v; want on_sale, 3 requests at 10 ms", token, stats)
		}
		if v := stats.Voucher; v.Orders != 3 || v.Paid != 1 || v.AwaitingPayment != 1 || v.Returned != 1 {
			t.Errorf("stats of voucher 3 (token %q): %+v; want 3 orders, 1 paid, 1 awaiting payment, 1 unit returned", token, v)
		}
	}
	res, err := http.Get(srv.URL + "/dashboard/chart.js")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/javascript") {
		t.Errorf("GET /dashboard/chart.js: %d %s; want a script a module may import", res.StatusCode, ct)
	}
}

func get(t *testing.T, url, token string, out any) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// TestQueuePanel: a queue voucher's stats carry its waiting room — the
// tickets waiting, the voucher's admit_per_second and the ETA of a ticket
// joining now — read from a real admission.Queue on the real Redis; an
// open voucher's carry none.
func TestQueuePanel(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	rc, prefix := testenv.Redis(t)
	at := time.Now()
	for _, v := range []flashsale.Voucher{
		{ID: 1, Admission: flashsale.AdmissionQueue, AdmitPerSecond: 2},
		{ID: 2, Admission: flashsale.AdmissionOpen},
	} {
		v.Title, v.Stock, v.BeginTime, v.EndTime = "v", 5, at.Add(time.Hour), at.Add(2*time.Hour)
		if err := db.CreateVoucher(ctx, &v); err != nil {
			t.Fatal(err)
		}
	}
	q, err := admission.New(rc, admission.Config{Prefix: prefix, Secret: []byte(strings.Repeat("s", 32)), Vouchers: db})
	if err != nil {
		t.Fatal(err)
	}
	for u := range int64(5) {
		if _, err := q.Join(ctx, 1, u+1); err != nil {
			t.Fatal(err)
		}
	}
	s := metrics.NewSampler(metrics.SamplerConfig{DB: db, Live: metrics.NewLive(time.Now)})
	if err := s.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	(&Dashboard{Sampler: s, Live: metrics.NewLive(time.Now), Queues: q}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	var stats struct{ Queue *queueView }
	get(t, srv.URL+"/api/vouchers/1/stats", "", &stats)
	if q := stats.Queue; q == nil || q.ETASeconds == nil || *q.ETASeconds != 3 || q.Waiting != 5 || q.Rate != 2 || q.ETAReason != "" {
		t.Errorf("queue of voucher 1: %+v; want 5 waiting at 2/s, and an ETA of 3 s (6 tickets at 2/s)", stats.Queue)
	}
	var raw map[string]json.RawMessage
	get(t, srv.URL+"/api/vouchers/2/stats", "", &raw)
	if _, ok := raw["queue"]; ok {
		t.Errorf("an open voucher's stats carry a queue: %s", raw["queue"])
	}
}
