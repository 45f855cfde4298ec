package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/dashboard"
	"github.com/flashsale/flashsale/metrics"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/httpapi"
)

// loadOpenAPI parses and validates the embedded document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	var raw struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(httpapi.OpenAPI(), &raw); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if !strings.HasPrefix(raw.OpenAPI, "3.") || len(raw.Paths) == 0 {
		t.Fatalf("openapi.json: openapi %q with %d paths; want 3.x with paths", raw.OpenAPI, len(raw.Paths))
	}
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI())
	if err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

// TestOpenAPIDescribesEveryRoute fails when a registered route or method
// is missing from openapi.json (or the document describes one that is not
// registered), or when an error code is missing or shown with another
// status than the one it maps to.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	// serve mounts the dashboard and /metrics beside the API (cmd/flashsale
	// observe.go); the dashboard's static files are a subtree, not a route.
	registered := append(httpapi.Routes(), dashboard.Routes()...)
	registered = append(registered, metrics.Route)
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is registered but not in openapi.json", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("openapi.json describes %s, which is not registered", d)
		}
	}

	// Each error response of the document says its status (x-status) and
	// lists the codes it carries.
	codeStatus := map[string]int{}
	responseStatus := map[string]int{}
	for name, ref := range doc.Components.Responses {
		status, _ := ref.Value.Extensions["x-status"].(float64)
		responseStatus[name] = int(status)
		codes := ref.Value.Content.Get("application/json").Schema.Value.Properties["error"].Value.Properties["code"].Value.Enum
		for _, c := range codes {
			if _, dup := codeStatus[c.(string)]; dup {
				t.Errorf("code %v is in two error responses", c)
			}
			codeStatus[c.(string)] = int(status)
		}
	}
	for _, code := range flashsale.ErrorCodes() {
		status, mapped := httpapi.MappedStatus(code)
		if !mapped {
			t.Errorf("code %q has no status in httpapi", code)
		}
		if got, ok := codeStatus[code]; !ok || got != status {
			t.Errorf("code %q: openapi.json shows it with status %d (listed: %v); httpapi maps it to %d", code, got, ok, status)
		}
		delete(codeStatus, code)
	}
	for code := range codeStatus {
		t.Errorf("openapi.json lists code %q, which the root package does not define", code)
	}
	// An operation's error responses sit under the status they carry.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, ref := range op.Responses.Map() {
				name, ok := strings.CutPrefix(ref.Ref, "#/components/responses/")
				if ok && fmt.Sprint(responseStatus[name]) != status {
					t.Errorf("%s %s: response %s refers to %s, which has status %d", method, path, status, name, responseStatus[name])
				}
			}
		}
	}
}

// TestOpenAPIMatchesResponses serves the document and checks real
// responses of the service against it.
func TestOpenAPIMatchesResponses(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	doc := loadOpenAPI(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	res, body := api.raw("GET", "/openapi.json", "", "")
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, httpapi.OpenAPI()) {
		t.Fatalf("GET /openapi.json: %d %s, %d bytes; want the embedded document", res.StatusCode, res.Header.Get("Content-Type"), len(body))
	}
	vid := api.createVoucher(1)
	for range 3 {
		api.createVoucher(1)
	}
	var placed struct {
		OrderID string `json:"order_id"`
	}
	api.do("POST", "/api/vouchers/"+vid+"/orders", api.userToken(5), "", &placed)
	var hook struct {
		ID string `json:"id"`
	}
	api.do("POST", "/api/webhooks", adminToken, `{"url": "http://127.0.0.1:9/h"}`, &hook)
	now := time.Now()
	tests := []struct {
		method, path, token, body string
		status                    int
	}{
		{"GET", "/healthz", "", "", 200},
		{"GET", "/readyz", "", "", 200},
		{"POST", "/api/vouchers", adminToken, voucherJSON("x", 3, now, now.Add(time.Hour)), 201},
		{"POST", "/api/vouchers", adminToken, `{"title":"x","stock":1.5}`, 400},
		{"POST", "/api/vouchers", adminToken, `{"title":"x","stock":3,"shards":1,"begin_time":"2026-01-01T00:00:00Z","end_time":"2036-01-01T00:00:00Z"}`, 201},
		{"POST", "/api/vouchers", adminToken, `{"title":"x","stock":3,"shards":3,"begin_time":"2026-01-01T00:00:00Z","end_time":"2036-01-01T00:00:00Z"}`, 400},
		{"POST", "/api/vouchers", api.userToken(5), voucherJSON("x", 3, now, now.Add(time.Hour)), 403},
		{"GET", "/api/vouchers", "", "", 200},
		{"GET", "/api/vouchers?limit=2", "", "", 200},
		{"GET", "/api/vouchers?limit=0", "", "", 400},
		{"GET", "/api/vouchers/" + vid, "", "", 200},
		{"GET", "/api/vouchers/42", "", "", 404},
		{"POST", "/api/vouchers/" + vid + "/orders", api.userToken(6), "", 409},
		{"POST", "/api/vouchers/" + vid + "/orders", "", "", 401},
		{"GET", "/api/orders/" + placed.OrderID, api.userToken(5), "", 200},
		{"GET", "/api/orders/007", api.userToken(5), "", 400},
		{"GET", "/api/buyers/5", adminToken, "", 200},
		{"GET", "/api/buyers/x", adminToken, "", 400},
		{"GET", "/api/buyers/5", api.userToken(5), "", 403},
		{"GET", "/api/webhooks/" + hook.ID + "/dead-letters", adminToken, "", 200},
		{"GET", "/api/webhooks/42/dead-letters", adminToken, "", 404},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			res, body := api.raw(tt.method, tt.path, tt.token, tt.body)
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.status, body)
			}
			validateResponse(t, router, res, body)
		})
	}
}

// validateResponse checks a response against the operation its request
// matches in the document.
func validateResponse(t *testing.T, router routers.Router, res *http.Response, body []byte) {
	t.Helper()
	route, params, err := router.FindRoute(res.Request)
	if err != nil {
		t.Fatalf("%s %s is not in openapi.json: %v", res.Request.Method, res.Request.URL, err)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: res.Request, PathParams: params, Route: route},
		Status:                 res.StatusCode,
		Header:                 res.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Fatalf("the response does not match openapi.json: %v\n%s", err, body)
	}
}

// TestOpenAPIMatchesDashboard checks the dashboard's JSON against the
// document: the list (a voucher on sale, one upcoming, one ended) and a
// voucher's stats as anyone and the admin see them.
func TestOpenAPIMatchesDashboard(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	now := time.Now()
	vid := api.createVoucher(3)
	api.createVoucherWindow(3, now.Add(time.Hour), now.Add(2*time.Hour))
	api.createVoucherWindow(3, now.Add(-time.Hour), now.Add(-time.Minute))
	api.do("POST", "/api/vouchers/"+vid+"/orders", api.userToken(5), "", nil)
	live := metrics.NewLive(time.Now)
	sampler := metrics.NewSampler(metrics.SamplerConfig{DB: api.db, Live: live})
	if err := sampler.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	id, err := flashsale.ParseID(vid)
	if err != nil {
		t.Fatal(err)
	}
	live.Latency(id, time.Millisecond)
	mux := http.NewServeMux()
	(&dashboard.Dashboard{Sampler: sampler, Live: live, IsAdmin: func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer "+adminToken
	}}).Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	router, err := legacy.NewRouter(loadOpenAPI(t))
	if err != nil {
		t.Fatal(err)
	}
	dash := &testAPI{t: t, url: srv.URL}
	for _, tt := range []struct{ name, path, token string }{
		{"list", "/api/stats", ""}, {"stats", "/api/vouchers/" + vid + "/stats", ""}, {"admin stats", "/api/vouchers/" + vid + "/stats", adminToken},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, body := dash.raw("GET", tt.path, tt.token, "")
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			validateResponse(t, router, res, body)
		})
	}
}

// TestOpenAPIDescribesRequestBodies checks the document's request bodies
// against what the server takes: a voucher's "shards", payment window and
// limit per buyer; an order's quantity; a payment.
func TestOpenAPIDescribesRequestBodies(t *testing.T) {
	doc := loadOpenAPI(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	voucher := func(more string) string {
		return `{"title":"x","stock":100,"begin_time":"2026-01-01T00:00:00Z","end_time":"2036-01-01T00:00:00Z"` + more + `}`
	}
	for _, tt := range []struct {
		path, body string
		valid      bool
	}{
		{"/api/vouchers", voucher(""), true},
		{"/api/vouchers", voucher(`,"shards":1`), true},
		{"/api/vouchers", voucher(`,"shards":64`), true},
		{"/api/vouchers", voucher(`,"shards":0`), false},
		{"/api/vouchers", voucher(`,"shards":65`), false},
		{"/api/vouchers", voucher(`,"payment_window_seconds":0,"limit_per_buyer":1`), true},
		{"/api/vouchers", voucher(`,"payment_window_seconds":86400,"limit_per_buyer":100`), true},
		{"/api/vouchers", voucher(`,"payment_window_seconds":86401`), false},
		{"/api/vouchers", voucher(`,"payment_window_seconds":-1`), false},
		{"/api/vouchers", voucher(`,"limit_per_buyer":0`), false},
		{"/api/vouchers", voucher(`,"limit_per_buyer":101`), false},
		{"/api/vouchers/1/orders", `{}`, true},
		{"/api/vouchers/1/orders", `{"quantity":1}`, true},
		{"/api/vouchers/1/orders", `{"quantity":100}`, true},
		{"/api/vouchers/1/orders", `{"quantity":0}`, false},
		{"/api/vouchers/1/orders", `{"quantity":101}`, false},
		{"/api/vouchers/1/orders", `{"quantity":null}`, false},
		{"/api/vouchers/1/orders", `{"quantity":"2"}`, false},
		{"/api/vouchers/1/orders", `{"quantity":1.5}`, false},
		{"/api/vouchers/1/orders", `{"user_id":"9"}`, false},
		{"/api/payments", `{"payment_id":"p","order_id":"7","amount":500}`, true},
		{"/api/payments", `{"payment_id":"p","order_id":7,"amount":0}`, true},
		{"/api/payments", `{"payment_id":"p","order_id":"007","amount":500}`, false},
		{"/api/payments", `{"payment_id":"","order_id":"7","amount":500}`, false},
		{"/api/payments", `{"payment_id":"p","order_id":"7"}`, false},
		{"/api/payments", `{"payment_id":"p","order_id":"7","amount":-1}`, false},
		{"/api/payments", `{"payment_id":"p","order_id":"7","amount":1,"status":"paid"}`, false},
	} {
		req, err := http.NewRequest("POST", "http://127.0.0.1"+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer x")
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatal(err)
		}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
		if err := openapi3filter.ValidateRequest(context.Background(), in); (err == nil) != tt.valid {
			t.Errorf("POST %s %s: validation error %v; want valid %v", tt.path, tt.body, err, tt.valid)
		}
	}
}

// TestOpenAPIMatchesOrderLife checks real answers of the order routes
// with quantities, payment windows, cancels and the payment webhook
// against the document.
func TestOpenAPIMatchesOrderLife(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	router, err := legacy.NewRouter(loadOpenAPI(t))
	if err != nil {
		t.Fatal(err)
	}
	vid := api.createSale(5, `"payment_window_seconds":600,"limit_per_buyer":2,"pay_value":100`)
	final := api.createSale(5, "")
	alice, bob := api.userToken(1), api.userToken(2)
	paid, cancelled := api.order(alice, vid, `{"quantity":2}`), api.order(bob, vid, "")
	created, unpaid := api.order(bob, final, ""), api.order(api.userToken(4), vid, "")
	payment := func(order, id string, amount int) string {
		return fmt.Sprintf(`{"payment_id":%q,"order_id":%q,"amount":%d}`, id, order, amount)
	}
	signed := func(body string) http.Header {
		return http.Header{httpapi.SignatureHeader: {httpapi.Sign([]byte(paymentSecret), []byte(body), time.Now())}}
	}
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }
	keyed := bearer(api.userToken(3))
	keyed.Set("Idempotency-Key", "k")
	tests := []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
	}{
		{"voucher", "GET", "/api/vouchers/" + vid, nil, "", 200},
		{"order awaiting payment", "GET", "/api/orders/" + paid.OrderID, bearer(alice), "", 200},
		{"order with a key", "POST", "/api/vouchers/" + vid + "/orders", keyed, `{"quantity":1}`, 200},
		{"limit reached", "POST", "/api/vouchers/" + vid + "/orders", bearer(alice), "", 409},
		{"bad quantity", "POST", "/api/vouchers/" + vid + "/orders", bearer(alice), `{"quantity":null}`, 400},
		{"cancel", "POST", "/api/orders/" + cancelled.OrderID + "/cancel", bearer(bob), "", 200},
		{"cancel another's", "POST", "/api/orders/" + paid.OrderID + "/cancel", bearer(bob), "", 404},
		{"cancel final", "POST", "/api/orders/" + created.OrderID + "/cancel", bearer(bob), "", 409},
		{"pay", "POST", "/api/payments", signed(payment(paid.OrderID, "p1", 200)), payment(paid.OrderID, "p1", 200), 200},
		{"paid order", "GET", "/api/orders/" + paid.OrderID, bearer(alice), "", 200},
		{"pay again", "POST", "/api/payments", signed(payment(paid.OrderID, "p2", 200)), payment(paid.OrderID, "p2", 200), 409},
		{"pay a cancelled order", "POST", "/api/payments", signed(payment(cancelled.OrderID, "p3", 100)), payment(cancelled.OrderID, "p3", 100), 409},
		{"wrong amount", "POST", "/api/payments", signed(payment(unpaid.OrderID, "p4", 1)), payment(unpaid.OrderID, "p4", 1), 400},
		{"bad signature", "POST", "/api/payments", signed("another body"), payment(paid.OrderID, "p5", 200), 401},
		{"unknown order", "POST", "/api/payments", signed(payment("42", "p6", 200)), payment("42", "p6", 200), 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body := api.send(tt.method, tt.path, tt.header, strings.NewReader(tt.body))
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tt.status, body)
			}
			validateResponse(t, router, res, body)
		})
	}
}
