package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flashsale/flashsale"
)

func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, "accepted"},
		{flashsale.Errorf(flashsale.ESoldOut, "x"), "sold_out"},
		{flashsale.Errorf(flashsale.EDuplicateOrder, "x"), "duplicate_order"},
		{flashsale.Errorf(flashsale.ELimitReached, "x"), "limit_reached"},
		{flashsale.Errorf(flashsale.ENotStarted, "x"), "not_started"},
		{flashsale.Errorf(flashsale.EEnded, "x"), "ended"},
		{flashsale.Errorf(flashsale.EBusy, "x"), "busy"},
		{flashsale.Errorf(flashsale.EUnavailable, "x"), "unavailable"},
		{flashsale.Errorf(flashsale.ENotFound, "x"), "invalid"},
		{flashsale.Errorf(flashsale.EInvalid, "x"), "invalid"},
		{flashsale.Errorf(flashsale.EPassRequired, "x"), "pass_required"},
		{flashsale.Errorf(flashsale.EPassInvalid, "x"), "pass_invalid"},
		{flashsale.Errorf(flashsale.EDenied, "x"), "denied"},
		{errors.New("boom"), "internal"},
	} {
		if got := Outcome(tc.err); got != tc.want {
			t.Errorf("Outcome(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// orderSvc refuses every order with err.
type orderSvc struct{ err error }

func (o orderSvc) PlaceOrder(context.Context, flashsale.OrderRequest) (*flashsale.Order, error) {
	if o.err != nil {
		return nil, o.err
	}
	return &flashsale.Order{ID: 1}, nil
}
func (o orderSvc) FindOrder(context.Context, int64) (*flashsale.Order, error) { return nil, o.err }
func (o orderSvc) CancelOrder(context.Context, int64, int64) (*flashsale.Order, error) {
	return nil, o.err
}
func (o orderSvc) PayOrder(context.Context, flashsale.Payment) (*flashsale.Order, error) {
	return nil, o.err
}

// TestMiddleware serves a mux like httpapi's behind the middleware: routes
// are labelled by pattern, a miss as unmatched, and an order request is
// counted once, by the order service when it got there, else by its
// status.
func TestMiddleware(t *testing.T) {
	m := New("conditional")
	svc := m.Orders(orderSvc{err: flashsale.Errorf(flashsale.ESoldOut, "sold out")})
	api := http.NewServeMux()
	api.HandleFunc(OrderRoute, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Limit") != "" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		_, err := svc.PlaceOrder(r.Context(), flashsale.OrderRequest{VoucherID: 7, UserID: 1})
		if err != nil {
			w.WriteHeader(http.StatusConflict)
		}
	})
	outer := http.NewServeMux()
	outer.Handle("/", api)
	srv := httptest.NewServer(m.Middleware(outer))
	defer srv.Close()
	send := func(path string, limited bool) {
		req, _ := http.NewRequest("POST", srv.URL+path, nil)
		if limited {
			req.Header.Set("X-Limit", "1")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	send("/api/vouchers/7/orders", false)
	send("/api/vouchers/7/orders", false)
	send("/api/vouchers/7/orders", true)
	send("/nowhere", false)
	for _, tc := range []struct {
		got  float64
		want float64
		what string
	}{
		{testutil.ToFloat64(m.orders.WithLabelValues("conditional", "sold_out")), 2, "sold_out"},
		{testutil.ToFloat64(m.orders.WithLabelValues("conditional", "rate_limited")), 1, "rate_limited"},
		{testutil.ToFloat64(m.orders.WithLabelValues("conditional", "accepted")), 0, "accepted"},
		{testutil.ToFloat64(m.httpRequests.WithLabelValues(OrderRoute, "409")), 2, "409 on the order route"},
		{testutil.ToFloat64(m.httpRequests.WithLabelValues(OrderRoute, "429")), 1, "429 on the order route"},
		{testutil.ToFloat64(m.httpRequests.WithLabelValues("unmatched", "404")), 1, "unmatched 404"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	if _, _, n := m.Live().Percentiles(7); n != 3 {
		t.Errorf("voucher 7's latency window holds %d requests, want 3", n)
	}
	if problems, err := testutil.GatherAndLint(m.Registry()); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %+v", err, problems)
	}
}

// TestLive counts outcomes per second on a clock the test moves.
func TestLive(t *testing.T) {
	now := time.Unix(1000, 0)
	l := NewLive(func() time.Time { return now })
	l.Count(5, "accepted")
	l.Count(5, "accepted")
	l.Count(5, "sold_out")
	l.Count(0, "accepted") // no voucher: not kept
	l.Count(5, "nonsense") // not an outcome: not kept
	now = now.Add(2 * time.Second)
	l.Count(5, "rate_limited")
	now = now.Add(time.Second)
	got := l.Seconds(5, 3)
	if len(got) != 3 || got[0].Time != 1000 || got[0].Accepted != 2 || got[0].Refused["sold_out"] != 1 ||
		got[1].Accepted != 0 || got[2].Refused["rate_limited"] != 1 {
		t.Errorf("Seconds = %+v", got)
	}
	now = now.Add(LiveSeconds * time.Second) // the ring wrapped: old slots must not show
	if s := l.Seconds(5, 5); s[0].Accepted != 0 || s[4].Refused != nil {
		t.Errorf("after a wrap: %+v", s)
	}
	l.Keep(map[int64]bool{})
	if len(l.vouchers) != 0 {
		t.Errorf("Keep left %d vouchers", len(l.vouchers))
	}
	for i := range maxLiveVouchers + 10 {
		l.Count(int64(i+1), "accepted")
	}
	if len(l.vouchers) != maxLiveVouchers {
		t.Errorf("%d vouchers kept, want the bound %d", len(l.vouchers), maxLiveVouchers)
	}
	if !strings.Contains(strings.Join(Outcomes, ","), "rate_limited") {
		t.Error("Outcomes lacks rate_limited")
	}
}
