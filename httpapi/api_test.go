package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/idempotency"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/lock"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/ratelimit"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/strategy"
)

const (
	secret        = "test-secret-test-secret-test-secret"
	adminToken    = "admin-secret-admin-secret-admin-secret"
	paymentSecret = "whsec-test-payment-secret"
)

// testAPI is the whole service on real Redis and MariaDB behind httptest.
type testAPI struct {
	t     testing.TB
	url   string
	auth  *auth.Authenticator
	db    *store.DB
	locks *lock.Client
	redis rueidis.Client // the Redis of everything (BenchmarkHotVoucher reads its CPU)
	h     http.Handler   // what the server serves (BenchmarkRefusalHandler calls it directly)
	// life pays, cancels and expires orders on the clock; another
	// instance (apiOptions.share) is served on the same MySQL database
	// and Redis prefix.
	life          *lifecycle.Service
	clock         *testClock
	dbURL, prefix string
	// queue is the waiting room; its admission runs until the test ends.
	queue *admission.Queue
}

// testClock is the clock of the strategies and of orders' lives: real
// time moved forward by Advance, so that a test reaches an order's pay_by
// without waiting for it. (The async gate sets pay_by by Redis's clock,
// the real one.)
type testClock struct{ ahead atomic.Int64 }

func (c *testClock) Now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *testClock) Advance(d time.Duration) { c.ahead.Add(int64(d)) }

type apiOptions struct {
	strategy string
	rateUser float64
	rateIP   float64
	ready    httpapi.ReadyFunc
	lockWait time.Duration
	// limiterDown gives the rate limiter a Redis client that is closed.
	limiterDown bool
	// redis, when set, is the Redis of everything instead of the shared
	// one; durability is async's.
	redis      rueidis.Client
	durability async.DurabilityConfig
	// share runs this instance on the MySQL database, Redis prefix and
	// clock of another.
	share *testAPI
	// noPayments leaves the payment secret unset.
	noPayments bool
	// noConsumer runs async without its consumer: accepted orders stay
	// pending.
	noConsumer bool
	// passTTL is the waiting room's (default 60s); trustProxy the server's.
	passTTL    time.Duration
	trustProxy bool
	// provider, when set, is an identity provider the server trusts
	// beside its HS256 tokens, its buyers numbered in the test's database.
	provider *auth.Provider
}

func newTestAPI(t testing.TB, o apiOptions) *testAPI {
	t.Helper()
	ctx := context.Background()
	rc, prefix := testenv.Redis(t)
	if o.redis != nil {
		rc = o.redis
	}
	api := &testAPI{t: t, redis: rc, prefix: prefix, clock: &testClock{}}
	if o.share != nil {
		api.prefix, api.dbURL, api.clock = o.share.prefix, o.share.dbURL, o.share.clock
	} else {
		api.dbURL = testenv.MySQLURL(t)
	}
	db, err := store.Open(ctx, api.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	api.db = db
	ids := idgen.NewSlots(rc, "id", idgen.WithPrefix(api.prefix+"idgen:"), idgen.WithFloor(db.MaxOrderID), idgen.WithLogger(slog.New(slog.DiscardHandler)))
	t.Cleanup(ids.Close)
	api.locks = lock.New(rc, lock.WithPrefix(api.prefix+"lock:"))
	t.Cleanup(func() { api.locks.Close() })
	if o.lockWait == 0 {
		o.lockWait = 5 * time.Second
	}
	if o.strategy == "" {
		o.strategy = "conditional"
	}
	vouchers, orders := api.services(o, ids)
	a, err := auth.New(secret, adminToken)
	if err != nil {
		t.Fatal(err)
	}
	if o.provider != nil {
		pctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		if err := a.UseProvider(pctx, *o.provider, db); err != nil {
			t.Fatal(err)
		}
	}
	api.auth = a
	api.queue = api.newQueue(o)
	srv := &httpapi.Server{
		Vouchers: vouchers,
		// As serve wraps every strategy.
		Orders:     idempotency.Wrap(admission.Wrap(orders, api.queue), rc, idempotency.Config{Prefix: api.prefix}),
		Admission:  api.queue,
		Events:     &outbox.Service{DB: db},
		TrustProxy: o.trustProxy,
		Auth:       a,
		Limiter:    ratelimit.New(rc, api.prefix+"rate:"),
		UserRate:   o.rateUser,
		IPRate:     o.rateIP,
		Ready:      o.ready,
	}
	if !o.noPayments {
		srv.PaymentSecret = []byte(paymentSecret)
	}
	if o.limiterDown {
		down, err := rueidis.NewClient(testenv.RedisOption())
		if err != nil {
			t.Fatal(err)
		}
		down.Close()
		srv.Limiter = ratelimit.New(down, api.prefix+"rate:")
	}
	api.h = srv.Handler()
	ts := httptest.NewServer(api.h)
	t.Cleanup(ts.Close)
	api.url = ts.URL
	return api
}

// services returns the strategy's services, and sets api.life; its
// expirer, and async's consumer, run until the test ends.
func (api *testAPI) services(o apiOptions, ids *idgen.Slots) (flashsale.VoucherService, flashsale.OrderService) {
	t := api.t
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	if o.strategy == "async" {
		// MaxGateWait: the tests' crowds are not the overload it is for.
		acfg := async.Config{Prefix: api.prefix + "a:", OrderIDs: ids, Durability: o.durability, MaxGateWait: time.Hour}
		api.life = lifecycle.New(api.db, lifecycle.Config{Restocker: async.Returns(api.redis, acfg), Now: api.clock.Now})
		acfg.Lifecycle = api.life
		svc, err := async.NewService(api.redis, api.db, acfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = api.life.Run(ctx, lifecycle.ExpirerConfig{}) })
		wg.Go(func() { svc.WatchReturns(ctx) })
		if !o.noConsumer {
			c := consume.New(api.redis, api.db, consume.Config{Prefix: api.prefix + "a:", Block: 100 * time.Millisecond, Refresh: 100 * time.Millisecond})
			wg.Go(func() { _ = c.Run(ctx) })
		}
		return svc, svc
	}
	api.life = lifecycle.New(api.db, lifecycle.Config{Now: api.clock.Now})
	wg.Go(func() { _ = api.life.Run(ctx, lifecycle.ExpirerConfig{}) })
	orders, err := strategy.New(o.strategy, strategy.Config{DB: api.db, IDs: ids, Locks: api.locks, LockWait: o.lockWait, Now: api.clock.Now, Lifecycle: api.life})
	if err != nil {
		t.Fatal(err)
	}
	return strategy.NewVoucherService(api.db, ids, "conditional"), orders
}

// newQueue returns the waiting room as serve builds it, admitting every
// 20 ms until the test ends.
func (api *testAPI) newQueue(o apiOptions) *admission.Queue {
	t := api.t
	units := func(ctx context.Context, id int64) (int, error) {
		v, err := api.db.Voucher(ctx, id)
		if err != nil {
			return 0, err
		}
		return v.Remaining, nil
	}
	if o.strategy == "async" {
		units = func(ctx context.Context, id int64) (int, error) {
			st, err := async.ReadState(ctx, api.redis, api.prefix+"a:", id)
			return st.Stock, err
		}
	}
	q, err := admission.New(api.redis, admission.Config{Prefix: api.prefix, Secret: []byte(secret), Vouchers: api.db, Units: units,
		PassTTL: o.passTTL, AdmitEvery: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = q.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return q
}

func (api *testAPI) userToken(id int64) string {
	api.t.Helper()
	tok, err := api.auth.UserToken(id, time.Hour)
	if err != nil {
		api.t.Fatal(err)
	}
	return tok
}

// do sends a request and decodes the JSON response into out (if not nil).
func (api *testAPI) do(method, path, token, body string, out any) *http.Response {
	api.t.Helper()
	res, data := api.raw(method, path, token, body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			api.t.Fatalf("%s %s: %d %q is not JSON: %v", method, path, res.StatusCode, data, err)
		}
	}
	return res
}

// raw sends a request and returns the response with its whole body.
func (api *testAPI) raw(method, path, token, body string) (*http.Response, []byte) {
	api.t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return api.send(method, path, h, strings.NewReader(body))
}

// send sends a request with the header and body and returns the response
// with its whole body. A body that is not a *strings.Reader has no known
// length, and is sent chunked.
func (api *testAPI) send(method, path string, h http.Header, body io.Reader) (*http.Response, []byte) {
	api.t.Helper()
	req, err := http.NewRequest(method, api.url+path, body)
	if err != nil {
		api.t.Fatal(err)
	}
	maps.Copy(req.Header, h)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		api.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		api.t.Fatal(err)
	}
	return res, data
}

// voucherJSON is a creation body for a voucher on sale from begin to end.
func voucherJSON(title string, stock int, begin, end time.Time) string {
	return fmt.Sprintf(`{"title":%q,"stock":%d,"begin_time":%q,"end_time":%q}`,
		title, stock, begin.Format(time.RFC3339Nano), end.Format(time.RFC3339Nano))
}

// createVoucher creates a voucher on sale now and returns its id.
func (api *testAPI) createVoucher(stock int) string {
	api.t.Helper()
	return api.createVoucherWindow(stock, time.Now().Add(-time.Minute), time.Now().Add(time.Hour))
}

func (api *testAPI) createVoucherWindow(stock int, begin, end time.Time) string {
	api.t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	res := api.do("POST", "/api/vouchers", adminToken, voucherJSON("test voucher", stock, begin, end), &out)
	if res.StatusCode != http.StatusCreated || out.ID == "" {
		api.t.Fatalf("create voucher: status %d, id %q", res.StatusCode, out.ID)
	}
	return out.ID
}

type errorBody = httpapi.ErrorBody

// wantError checks the status and the error code of a response.
func wantError(t *testing.T, res *http.Response, body errorBody, status int, code string) {
	t.Helper()
	if res.StatusCode != status || body.Error.Code != code || body.Error.Message == "" {
		t.Fatalf("got %d %+v; want %d with code %q and a message", res.StatusCode, body.Error, status, code)
	}
}

// wantErrorMessage is wantError that also wants message in the error's
// message.
func wantErrorMessage(t *testing.T, res *http.Response, body errorBody, status int, code, message string) {
	t.Helper()
	wantError(t, res, body, status, code)
	if !strings.Contains(body.Error.Message, message) {
		t.Fatalf("message %q does not mention %q", body.Error.Message, message)
	}
}

func TestHealthAndReady(t *testing.T) {
	api := newTestAPI(t, apiOptions{ready: func(context.Context) (map[string]any, error) {
		return map[string]any{"backlog": 3}, nil
	}})
	var health map[string]string
	if res := api.do("GET", "/healthz", "", "", &health); res.StatusCode != 200 || health["status"] != "ok" {
		t.Fatalf("healthz: %d %v", res.StatusCode, health)
	}
	var ready map[string]any
	if res := api.do("GET", "/readyz", "", "", &ready); res.StatusCode != 200 || ready["status"] != "ready" || len(ready) != 1 {
		t.Fatalf("readyz: %d %v", res.StatusCode, ready)
	}
}

func TestReadyReportsDownDependency(t *testing.T) {
	api := newTestAPI(t, apiOptions{ready: func(context.Context) (map[string]any, error) {
		return nil, fmt.Errorf("database: connection refused")
	}})
	var body struct {
		Status string `json:"status"`
		Error  struct{ Code, Message string }
	}
	res := api.do("GET", "/readyz", "", "", &body)
	if res.StatusCode != http.StatusServiceUnavailable || body.Status != "unavailable" || body.Error.Code != flashsale.EUnavailable || strings.Contains(body.Error.Message, "refused") {
		t.Fatalf("readyz with a dependency down: %d %+v", res.StatusCode, body)
	}
}

func TestCreateAndGetVoucher(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	begin := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	end := begin.Add(2 * time.Hour)
	var created struct{ ID string }
	res := api.do("POST", "/api/vouchers", adminToken, voucherJSON("100 off", 7, begin, end), &created)
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", res.StatusCode)
	}
	var got map[string]any
	res = api.do("GET", "/api/vouchers/"+created.ID, "", "", &got)
	want := map[string]any{
		"id": created.ID, "title": "100 off", "stock": float64(7), "remaining": float64(7), "orders": float64(0),
		"begin_time": "2026-11-21T10:00:00Z", "end_time": "2026-11-21T12:00:00Z", "shards": float64(1),
		"payment_window_seconds": float64(0), "limit_per_buyer": float64(1), "admission": "open", "admit_per_second": float64(0),
	}
	if res.StatusCode != 200 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("get voucher: %d %v; want %v", res.StatusCode, got, want)
	}
}

func TestCreateVoucherRejectsBadInput(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	now := time.Now().UTC()
	good := voucherJSON("ok", 1, now, now.Add(time.Hour))
	tests := []struct {
		name, body, message string
	}{
		{"empty body", "", "empty"},
		{"malformed", `{"title":`, "not valid JSON"},
		{"an array", `[1,2]`, "the body must be a JSON object, not a JSON array"},
		{"a string", `"x"`, "the body must be a JSON object, not a JSON string"},
		{"begin as number", `{"title":"x","stock":1,"begin_time":5,"end_time":"2026-01-02T00:00:00Z"}`, `"begin_time" must be a JSON string`},
		{"title as number", `{"title":5,"stock":1,"begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z"}`, `"title" must be a JSON string`},
		{"unknown field", `{"title":"x","stock":1,"begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z","user_id":5}`, "unknown field"},
		{"trailing data", good + `{}`, "single JSON object"},
		{"negative stock", voucherJSON("x", -1, now, now.Add(time.Hour)), "stock"},
		{"zero stock", voucherJSON("x", 0, now, now.Add(time.Hour)), "stock"},
		{"stock as string", `{"title":"x","stock":"5","begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z"}`, `"stock" must be a JSON number`},
		{"end before begin", voucherJSON("x", 1, now, now.Add(-time.Hour)), "end_time must be after begin_time"},
		{"bad time", `{"title":"x","stock":1,"begin_time":"yesterday","end_time":"2026-01-02T00:00:00Z"}`, `"begin_time" must be an RFC 3339 time`},
		{"end in year 10000 in UTC", `{"title":"x","stock":1,"begin_time":"2026-01-01T00:00:00Z","end_time":"9999-12-31T23:59:59-01:00"}`, "years 1000 to 9999"},
		{"missing title", `{"stock":1,"begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z"}`, `"title" is required`},
		{"missing end", `{"title":"x","stock":1,"begin_time":"2026-01-01T00:00:00Z"}`, `"end_time" is required`},
		{"empty title", voucherJSON("", 1, now, now.Add(time.Hour)), "title"},
		{"oversized", `{"title":"` + strings.Repeat("x", 70<<10) + `"}`, "larger than"},
		{"oversized by trailing space", good + strings.Repeat(" ", 70<<10), "larger than"},
		{"window under a microsecond", `{"title":"x","stock":1,"begin_time":"2026-01-01T00:00:00.0000001Z","end_time":"2026-01-01T00:00:00.0000009Z"}`, "end_time must be after begin_time"},
		{"zero shards", `{"title":"x","stock":9,"shards":0,"begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z"}`, "shards must be 1 to 64"},
		{"65 shards", `{"title":"x","stock":99,"shards":65,"begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z"}`, "shards must be 1 to 64"},
		{"more shards than stock", `{"title":"x","stock":2,"shards":3,"begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z"}`, "shards must be at most the stock"},
		{"shards with a synchronous strategy", `{"title":"x","stock":9,"shards":3,"begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z"}`, "needs the async strategy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body errorBody
			res := api.do("POST", "/api/vouchers", adminToken, tt.body, &body)
			wantErrorMessage(t, res, body, http.StatusBadRequest, flashsale.EInvalid, tt.message)
		})
	}
	var vouchers []*flashsale.Voucher
	vouchers, err := api.db.ListVouchers(context.Background())
	if err != nil || len(vouchers) != 0 {
		t.Fatalf("bad input wrote vouchers: %d, %v", len(vouchers), err)
	}
}

func TestAuthRules(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createVoucher(5)
	now := time.Now()
	body := voucherJSON("x", 1, now, now.Add(time.Hour))
	expired, err := api.auth.UserToken(1, -time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"create without token", "POST", "/api/vouchers", "", body, 401, flashsale.EUnauthorized},
		{"create with garbage token", "POST", "/api/vouchers", "nope", body, 401, flashsale.EUnauthorized},
		{"create with user token", "POST", "/api/vouchers", api.userToken(1), body, 403, flashsale.EForbidden},
		{"order without token", "POST", "/api/vouchers/" + vid + "/orders", "", "", 401, flashsale.EUnauthorized},
		{"order with expired token", "POST", "/api/vouchers/" + vid + "/orders", expired, "", 401, flashsale.EUnauthorized},
		{"order with admin token", "POST", "/api/vouchers/" + vid + "/orders", adminToken, "", 401, flashsale.EUnauthorized},
		{"get order without token", "GET", "/api/orders/1", "", "", 401, flashsale.EUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eb errorBody
			res := api.do(tt.method, tt.path, tt.token, tt.body, &eb)
			wantError(t, res, eb, tt.status, tt.code)
		})
	}
}

// TestOrderFlowAndErrors places and finds an order with every safe
// strategy (async answers pending until its consumer persists the order)
// and checks every refusal.
func TestOrderFlowAndErrors(t *testing.T) {
	for _, tt := range []struct{ strategy, status string }{
		{"conditional", "created"},
		{"lock", "created"},
		{"async", "pending"},
	} {
		t.Run(tt.strategy, func(t *testing.T) { testOrderFlowAndErrors(t, tt.strategy, tt.status) })
	}
}

func testOrderFlowAndErrors(t *testing.T, strategyName, placedStatus string) {
	api := newTestAPI(t, apiOptions{strategy: strategyName})
	vid := api.createVoucher(2)
	alice, bob, carol := api.userToken(101), api.userToken(102), api.userToken(103)

	var placed struct {
		OrderID string `json:"order_id"`
		Status  string `json:"status"`
	}
	// The buyer is the token's: a body naming another is refused.
	var eb errorBody
	res := api.do("POST", "/api/vouchers/"+vid+"/orders", alice, `{"user_id":"999"}`, &eb)
	wantErrorMessage(t, res, eb, 400, flashsale.EInvalid, `unknown field "user_id"`)
	res = api.do("POST", "/api/vouchers/"+vid+"/orders", alice, "", &placed)
	if res.StatusCode != 200 || placed.Status != placedStatus || placed.OrderID == "" {
		t.Fatalf("order: %d %+v; want status %s", res.StatusCode, placed, placedStatus)
	}
	var got map[string]any
	res = api.do("GET", "/api/orders/"+placed.OrderID, alice, "", &got)
	want := map[string]any{"order_id": placed.OrderID, "voucher_id": vid, "user_id": "101", "quantity": float64(1)}
	status := got["status"]
	delete(got, "status")
	if res.StatusCode != 200 || fmt.Sprint(got) != fmt.Sprint(want) || (status != "created" && status != placedStatus) {
		t.Fatalf("get order: %d %v status %q; want %v", res.StatusCode, got, status, want)
	}
	if res := api.do("GET", "/api/orders/"+placed.OrderID, adminToken, "", &got); res.StatusCode != 200 || got["user_id"] != "101" {
		t.Fatalf("admin get order: %d %v", res.StatusCode, got)
	}

	// A repeat order while stock is left (after the sell-out, the async
	// gate answers sold_out first, as the seed's script does).
	res = api.do("POST", "/api/vouchers/"+vid+"/orders", alice, "", &eb)
	wantError(t, res, eb, 409, flashsale.EDuplicateOrder)
	if res := api.do("POST", "/api/vouchers/"+vid+"/orders", bob, "", &placed); res.StatusCode != 200 {
		t.Fatalf("bob's order: %d", res.StatusCode)
	}

	past := api.createVoucherWindow(5, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	future := api.createVoucherWindow(5, time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	tests := []struct {
		name, method, path, token string
		status                    int
		code                      string
	}{
		{"sold out", "POST", "/api/vouchers/" + vid + "/orders", carol, 409, flashsale.ESoldOut},
		{"not started", "POST", "/api/vouchers/" + future + "/orders", bob, 409, flashsale.ENotStarted},
		{"ended", "POST", "/api/vouchers/" + past + "/orders", bob, 409, flashsale.EEnded},
		{"unknown voucher", "POST", "/api/vouchers/123456789/orders", bob, 404, flashsale.ENotFound},
		{"non-numeric voucher id", "POST", "/api/vouchers/abc/orders", bob, 400, flashsale.EInvalid},
		{"negative voucher id", "POST", "/api/vouchers/-4/orders", bob, 400, flashsale.EInvalid},
		{"overflowing voucher id", "POST", "/api/vouchers/99999999999999999999/orders", bob, 400, flashsale.EInvalid},
		{"someone else's order", "GET", "/api/orders/" + placed.OrderID, alice, 404, flashsale.ENotFound},
		{"unknown order", "GET", "/api/orders/42", bob, 404, flashsale.ENotFound},
		{"non-numeric order id", "GET", "/api/orders/x1", bob, 400, flashsale.EInvalid},
		{"unknown voucher get", "GET", "/api/vouchers/42", "", 404, flashsale.ENotFound},
		{"non-numeric voucher get", "GET", "/api/vouchers/1.5", "", 400, flashsale.EInvalid},
		{"unknown route", "GET", "/api/nothing", "", 404, flashsale.ENotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eb errorBody
			res := api.do(tt.method, tt.path, tt.token, "", &eb)
			wantError(t, res, eb, tt.status, tt.code)
		})
	}
	var v map[string]any
	api.do("GET", "/api/vouchers/"+vid, "", "", &v)
	if v["remaining"] != float64(0) || v["orders"] != float64(2) {
		t.Fatalf("voucher after the sale: %v", v)
	}
}

func TestRateLimits(t *testing.T) {
	tests := []struct {
		name             string
		rateUser, rateIP float64
		users            int
	}{
		{"per user", 2, 0, 1},
		{"per IP", 0, 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newTestAPI(t, apiOptions{rateUser: tt.rateUser, rateIP: tt.rateIP})
			vid := api.createVoucher(100)
			limited := 0
			var last *http.Response
			for i := range 6 {
				var eb errorBody
				res := api.do("POST", "/api/vouchers/"+vid+"/orders", api.userToken(int64(1+i%tt.users)), "", &eb)
				if res.StatusCode == http.StatusTooManyRequests {
					wantError(t, res, eb, 429, flashsale.ERateLimited)
					limited++
					last = res
				}
			}
			if limited < 3 || last.Header.Get("Retry-After") == "" {
				t.Fatalf("%d of 6 requests limited at 2/s (want >= 3), Retry-After %q", limited, last.Header.Get("Retry-After"))
			}
		})
	}
}

func TestRateLimiterDownIsUnavailable(t *testing.T) {
	api := newTestAPI(t, apiOptions{rateUser: 100, limiterDown: true})
	vid := api.createVoucher(10)
	var eb errorBody
	res := api.do("POST", "/api/vouchers/"+vid+"/orders", api.userToken(1), "", &eb)
	wantError(t, res, eb, http.StatusServiceUnavailable, flashsale.EUnavailable)
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After on a 503")
	}
	if a, err := api.db.AuditVoucher(context.Background(), mustID(t, vid)); err != nil || a.Orders != 0 {
		t.Fatalf("audit %+v, %v; want no order taken while the limiter is down", a, err)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	tests := []struct{ method, path, allow string }{
		{"DELETE", "/api/vouchers/1", "GET, HEAD"},
		{"PUT", "/api/vouchers", "GET, HEAD, POST"},
		{"GET", "/api/vouchers/1/orders", "POST"},
		{"POST", "/openapi.json", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			var eb errorBody
			res := api.do(tt.method, tt.path, adminToken, "", &eb)
			wantError(t, res, eb, http.StatusMethodNotAllowed, flashsale.EMethodNotAllowed)
			if allow := res.Header.Get("Allow"); allow != tt.allow || !strings.Contains(eb.Error.Message, tt.allow) {
				t.Fatalf("Allow = %q, message %q; want %q in both", allow, eb.Error.Message, tt.allow)
			}
		})
	}
}

func decode(res *http.Response, out any) error {
	return json.NewDecoder(res.Body).Decode(out)
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	var id int64
	if _, err := fmt.Sscan(s, &id); err != nil {
		t.Fatal(err)
	}
	return id
}
