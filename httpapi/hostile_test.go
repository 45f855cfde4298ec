package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
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
