package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/httpapi"
)

// TestIdempotencyKeysDifferingInCase orders twice as one buyer with the
// keys abc and ABC on an async voucher of limit 2: two orders, and both
// reach MySQL (issue 33: MySQL's case-blind collation made the second a
// duplicate the consumer retried without end, and the voucher stalled).
func TestIdempotencyKeysDifferingInCase(t *testing.T) {
	api := newTestAPI(t, apiOptions{strategy: "async"})
	vid := api.createSale(10, `"limit_per_buyer":2`)
	alice := api.userToken(1)
	first := api.order(alice, vid, "", "Idempotency-Key", "abc")
	second := api.order(alice, vid, "", "Idempotency-Key", "ABC")
	wantOrder(t, first, 1, "pending")
	wantOrder(t, second, 1, "pending")
	if first.OrderID == second.OrderID {
		t.Fatalf("abc and ABC gave one order %s", first.OrderID)
	}
	waitPersisted(t, api, vid, 2)
	// Another buyer's order still gets through.
	wantOrder(t, api.order(api.userToken(2), vid, ""), 1, "pending")
	waitPersisted(t, api, vid, 3)
}

// TestIdempotencyKeyVisibleASCII refuses a key with any byte outside
// 0x21 to 0x7E, which collations and Redis would compare differently.
func TestIdempotencyKeyVisibleASCII(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createSale(5, "")
	for _, key := range []string{"a b", "caf\u00e9", "k\xff", "k\tk"} {
		wantRefusal(t, api.order(api.userToken(9), vid, "", "Idempotency-Key", key), http.StatusBadRequest, flashsale.EInvalid)
	}
	wantOrder(t, api.order(api.userToken(9), vid, "", "Idempotency-Key", "!~azAZ09-_."), 1, "created")
}

// TestReadyIsCheapAndTerse: /readyz, which anyone may call, checks the
// dependencies at most once a second however often it is asked, and
// shows no detail of them (issue 33: it showed the backlog, and ran a Lua
// call per voucher per request).
func TestReadyIsCheapAndTerse(t *testing.T) {
	var calls atomic.Int64
	api := newTestAPI(t, apiOptions{ready: func(context.Context) (map[string]any, error) {
		calls.Add(1)
		return map[string]any{"backlog": 3}, nil
	}})
	start := time.Now()
	for range 200 {
		res, body := api.raw("GET", "/readyz", "", "")
		if res.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"status":"ready"}` {
			t.Fatalf("readyz: %d %s", res.StatusCode, body)
		}
	}
	if n, most := calls.Load(), int64(time.Since(start)/time.Second)+1; n > most {
		t.Fatalf("200 requests in %v checked the dependencies %d times; want at most %d", time.Since(start), n, most)
	}
}

// TestJSONFieldNamesExact: a body's field names are exact and given once
// (issue 33: {"Quantity":1} was taken, and of two "quantity" the last).
func TestJSONFieldNamesExact(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createSale(5, `"limit_per_buyer":2`)
	for _, body := range []string{`{"Quantity":1}`, `{"QUANTITY":2}`, `{"quantity":1,"quantity":2}`, `{"quantity":1,"QuAntity":2}`} {
		wantRefusal(t, api.order(api.userToken(3), vid, body), http.StatusBadRequest, flashsale.EInvalid)
	}
	now := time.Now().UTC()
	good := voucherJSON("ok", 1, now, now.Add(time.Hour))
	for _, body := range []string{
		strings.Replace(good, `"title"`, `"Title"`, 1),
		strings.Replace(good, `"stock":1`, `"stock":1,"stock":100`, 1),
	} {
		var eb errorBody
		wantError(t, api.do("POST", "/api/vouchers", adminToken, body, &eb), eb, http.StatusBadRequest, flashsale.EInvalid)
	}
	wantOrder(t, api.order(api.userToken(3), vid, `{"quantity":2}`), 2, "created")
}

// TestHeadersAndOversizedTokens: every answer says nosniff, and a token
// over 4 KB is refused before anything parses it.
func TestHeadersAndOversizedTokens(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createSale(5, "")
	for _, path := range []string{"/healthz", "/api/vouchers/" + vid, "/nowhere", "/api/vouchers/007"} {
		if res, _ := api.raw("GET", path, "", ""); res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: %d without nosniff", path, res.StatusCode)
		}
	}
	huge := api.userToken(5) + strings.Repeat("A", httpapi.MaxTokenBytes)
	a := api.order(huge, vid, "")
	wantRefusal(t, a, http.StatusUnauthorized, flashsale.EUnauthorized)
	if !strings.Contains(a.Error.Message, "longer") {
		t.Fatalf("a 4 KB token: %q, want it refused for its length", a.Error.Message)
	}
}

// TestWrongAdminGuessesThrottled: wrong admin tokens from one address are
// rate_limited after a burst, and then no token from there is compared
// (the right one would otherwise still be found); other addresses are
// not affected.
func TestWrongAdminGuessesThrottled(t *testing.T) {
	api := newTestAPI(t, apiOptions{trustProxy: true})
	guess := func(from, token string) int {
		h := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}, "X-Forwarded-For": {from}}
		res, _ := api.send("GET", "/api/denylist", h, nil)
		return res.StatusCode
	}
	limited := 0
	for i := range 30 {
		if code := guess("198.51.100.7", fmt.Sprintf("guess-%032d", i)); code == http.StatusTooManyRequests {
			limited++
		} else if code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401 or 429", i, code)
		}
	}
	if limited < 10 {
		t.Fatalf("%d of 30 wrong guesses in a moment were throttled; want most", limited)
	}
	if code := guess("198.51.100.7", adminToken); code != http.StatusTooManyRequests {
		t.Fatalf("the admin token from the blocked address: %d, want 429", code)
	}
	// The refusal is the 429 the OpenAPI document gives every admin route.
	router, err := legacy.NewRouter(loadOpenAPI(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/api/denylist", "/api/buyers/5", "/api/events"} {
		res, body := api.send("GET", path, http.Header{"Authorization": {"Bearer " + adminToken}, "X-Forwarded-For": {"198.51.100.7"}}, nil)
		if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
			t.Fatalf("GET %s from the blocked address: %d, Retry-After %q; want 429 with it", path, res.StatusCode, res.Header.Get("Retry-After"))
		}
		validateResponse(t, router, res, body)
	}
	if code := guess("198.51.100.9", adminToken); code != http.StatusOK {
		t.Fatalf("the admin token from another address: %d, want 200", code)
	}
	if code := guess("198.51.100.8", "another-guess"); code != http.StatusUnauthorized {
		t.Fatalf("another address's first guess: %d, want 401", code)
	}
	// GET /api/orders/{id} takes the admin token too: guesses there count.
	h := http.Header{"Authorization": {"Bearer wrong-guess"}, "X-Forwarded-For": {"198.51.100.7"}}
	if res, _ := api.send("GET", "/api/orders/1", h, nil); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a guess on an order from the guessing address: %d, want 429", res.StatusCode)
	}
}
