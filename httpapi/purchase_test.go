package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// saleJSON is a creation body for a voucher on sale now, with more fields
// (the purchase rules, a price) given as JSON members.
func saleJSON(stock int, more string) string {
	now := time.Now().UTC()
	body := fmt.Sprintf(`{"title":"sale","stock":%d,"begin_time":%q,"end_time":%q`, stock,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))
	if more != "" {
		body += "," + more
	}
	return body + "}"
}

// createSale creates a voucher on sale now with saleJSON's more fields and
// returns its id.
func (api *testAPI) createSale(stock int, more string) string {
	api.t.Helper()
	var out struct{ ID string }
	if res := api.do("POST", "/api/vouchers", adminToken, saleJSON(stock, more), &out); res.StatusCode != http.StatusCreated {
		api.t.Fatalf("create voucher with %s: %d", more, res.StatusCode)
	}
	return out.ID
}

// answer is an answer of the order routes: an order, or an error.
type answer struct {
	Code     int    `json:"-"` // the HTTP status
	OrderID  string `json:"order_id"`
	UserID   string `json:"user_id"`
	Quantity int    `json:"quantity"`
	Status   string `json:"status"`
	PayBy    string `json:"pay_by"`
	Error    struct {
		Code, Message string
	} `json:"error"`
}

// call sends a request with the buyer's token (and header pairs) and
// decodes the answer.
func (api *testAPI) call(method, path, token string, body io.Reader, header ...string) answer {
	api.t.Helper()
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	res, data := api.send(method, path, h, body)
	a := answer{Code: res.StatusCode}
	if err := json.Unmarshal(data, &a); err != nil {
		api.t.Fatalf("%s %s: %d %q is not JSON: %v", method, path, res.StatusCode, data, err)
	}
	return a
}

// order places an order of the voucher with the body ("" for none).
func (api *testAPI) order(token, voucher, body string, header ...string) answer {
	api.t.Helper()
	return api.call("POST", "/api/vouchers/"+voucher+"/orders", token, strings.NewReader(body), header...)
}

// wantOrder fails unless a is an order of q units with the status.
func wantOrder(t *testing.T, a answer, q int, status string) {
	t.Helper()
	if a.Code != http.StatusOK || a.OrderID == "" || a.Quantity != q || a.Status != status {
		t.Fatalf("got %+v; want an order of %d with status %s", a, q, status)
	}
}

// wantRefusal fails unless a is the error with the status and code.
func wantRefusal(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.Code != status || a.Error.Code != code || a.Error.Message == "" {
		t.Fatalf("got %+v; want %d %s with a message", a, status, code)
	}
}

// audit returns the voucher's audit.
func (api *testAPI) audit(voucher string) flashsale.Audit {
	api.t.Helper()
	id, err := flashsale.ParseID(voucher)
	if err != nil {
		api.t.Fatal(err)
	}
	a, err := api.db.AuditVoucher(context.Background(), id)
	if err != nil {
		api.t.Fatal(err)
	}
	return a
}

// TestVoucherPurchaseRules creates vouchers with payment windows and
// limits per buyer at and past their bounds; GET returns what was kept.
func TestVoucherPurchaseRules(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	for _, tt := range []struct {
		more          string
		window, limit float64
	}{
		{"", 0, 1},
		{`"payment_window_seconds":0,"limit_per_buyer":1`, 0, 1},
		{`"payment_window_seconds":86400,"limit_per_buyer":100`, 86400, 100},
		{`"payment_window_seconds":1,"limit_per_buyer":7`, 1, 7},
	} {
		var got map[string]any
		api.do("GET", "/api/vouchers/"+api.createSale(100, tt.more), "", "", &got)
		if got["payment_window_seconds"] != tt.window || got["limit_per_buyer"] != tt.limit {
			t.Errorf("voucher created with %s: %v; want window %v, limit %v", tt.more, got, tt.window, tt.limit)
		}
	}
	for _, tt := range []struct{ name, more, message string }{
		{"negative window", `"payment_window_seconds":-1`, "payment_window_seconds must be 0 to 86400"},
		{"window past a day", `"payment_window_seconds":86401`, "payment_window_seconds must be 0 to 86400"},
		{"window 1.5", `"payment_window_seconds":1.5`, `field "payment_window_seconds" must be a whole number`},
		{"window as string", `"payment_window_seconds":"60"`, `field "payment_window_seconds" must be a JSON number`},
		{"limit 0", `"limit_per_buyer":0`, "limit_per_buyer must be 1 to 100"},
		{"limit 101", `"limit_per_buyer":101`, "limit_per_buyer must be 1 to 100"},
		{"limit above the stock", `"limit_per_buyer":11`, "limit_per_buyer must be at most the stock (10)"},
		{"limit null", `"limit_per_buyer":null`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var eb errorBody
			res := api.do("POST", "/api/vouchers", adminToken, saleJSON(10, tt.more), &eb)
			if tt.message == "" { // null is absent, as for every optional field
				if res.StatusCode != http.StatusCreated {
					t.Fatalf("%s: %d %+v", tt.more, res.StatusCode, eb)
				}
				return
			}
			wantErrorMessage(t, res, eb, http.StatusBadRequest, flashsale.EInvalid, tt.message)
		})
	}
}

// TestOrderQuantity places orders of every quantity a body can say, and
// refuses every one it cannot, without taking stock.
func TestOrderQuantity(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createSale(100, `"limit_per_buyer":3`)
	user := int64(0)
	buyer := func() string { user++; return api.userToken(user) }
	for _, tt := range []struct {
		name string
		body io.Reader
		q    int
	}{
		{"no body", strings.NewReader(""), 1},
		{"only white space", strings.NewReader(" \r\n\t"), 1},
		{"{}", strings.NewReader("{}"), 1},
		{"1", strings.NewReader(`{"quantity":1}`), 1},
		{"2, chunked", io.MultiReader(strings.NewReader(`{"quantity":2}`)), 2},
		{"the limit", strings.NewReader(` {"quantity": 3} `), 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wantOrder(t, api.call("POST", "/api/vouchers/"+vid+"/orders", buyer(), tt.body), tt.q, "created")
		})
	}
	t.Run("an empty chunked body", func(t *testing.T) {
		// Go's client sends an empty body of unknown length as none: the
		// handler gets one with no Content-Length directly.
		req := httptest.NewRequest("POST", "/api/vouchers/"+vid+"/orders", io.MultiReader())
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+buyer())
		rec := httptest.NewRecorder()
		api.h.ServeHTTP(rec, req)
		var a answer
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		a.Code = rec.Code
		wantOrder(t, a, 1, "created")
	})
	before := api.audit(vid)
	for _, tt := range []struct{ name, body, message string }{
		{"0", `{"quantity":0}`, `field "quantity" must be a whole number from 1`},
		{"-1", `{"quantity":-1}`, `field "quantity" must be a whole number from 1`},
		{"-0", `{"quantity":-0}`, `field "quantity" must be a whole number from 1`},
		{"above the voucher's limit", `{"quantity":4}`, "quantity must be 1 to 3, the voucher's limit per buyer"},
		{"above any limit", `{"quantity":101}`, `field "quantity" must be a whole number from 1`},
		{"null", `{"quantity":null}`, `got null`},
		{"a string", `{"quantity":"2"}`, `got "2"`},
		{"a fraction", `{"quantity":1.5}`, `got 1.5`},
		{"2.0", `{"quantity":2.0}`, `got 2.0`},
		{"an exponent", `{"quantity":1e0}`, `got 1e0`},
		{"huge", `{"quantity":99999999999999999999999}`, `got 99999999999999999999999`},
		{"longer than shown", `{"quantity":` + strings.Repeat("9", 60) + `}`, "..."},
		{"true", `{"quantity":true}`, `got true`},
		{"an array", `{"quantity":[1]}`, `got [1]`},
		{"an unknown field", `{"quantity":1,"user_id":"9"}`, `unknown field "user_id"`},
		{"trailing data", `{"quantity":1}{}`, "single JSON object"},
		{"not JSON", `{"quantity":`, "not valid JSON"},
		{"not an object", `2`, "must be a JSON object"},
		{"not UTF-8", "{\"quantity\":1,\"\xff\":1}", "not valid UTF-8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := api.order(buyer(), vid, tt.body)
			wantRefusal(t, a, http.StatusBadRequest, flashsale.EInvalid)
			if !strings.Contains(a.Error.Message, tt.message) {
				t.Fatalf("message %q does not say %q", a.Error.Message, tt.message)
			}
		})
	}
	if after := api.audit(vid); after != before {
		t.Fatalf("refused orders changed the voucher: %+v, then %+v", before, after)
	}
}

// TestOrderAllOrNothingAndLimit sells what is left or nothing, and keeps a
// buyer's live orders within the limit: limit_reached above 1,
// duplicate_order naming the order at 1.
func TestOrderAllOrNothingAndLimit(t *testing.T) {
	for _, name := range []string{"conditional", "async"} {
		t.Run(name, func(t *testing.T) {
			api := newTestAPI(t, apiOptions{strategy: name})
			placed := "created"
			if name == "async" {
				placed = "pending"
			}
			vid := api.createSale(5, `"limit_per_buyer":3`)
			alice, bob, carol := api.userToken(1), api.userToken(2), api.userToken(3)
			wantOrder(t, api.order(alice, vid, `{"quantity":2}`), 2, placed)
			wantRefusal(t, api.order(alice, vid, `{"quantity":2}`), http.StatusConflict, flashsale.ELimitReached)
			wantOrder(t, api.order(alice, vid, `{"quantity":1}`), 1, placed)
			wantRefusal(t, api.order(alice, vid, ""), http.StatusConflict, flashsale.ELimitReached)
			wantRefusal(t, api.order(bob, vid, `{"quantity":3}`), http.StatusConflict, flashsale.ESoldOut)
			wantOrder(t, api.order(bob, vid, `{"quantity":2}`), 2, placed)
			wantRefusal(t, api.order(carol, vid, ""), http.StatusConflict, flashsale.ESoldOut)

			one := api.createSale(5, "")
			first := api.order(alice, one, "")
			wantOrder(t, first, 1, placed)
			again := api.order(alice, one, "")
			wantRefusal(t, again, http.StatusConflict, flashsale.EDuplicateOrder)
			if !strings.Contains(again.Error.Message, first.OrderID) {
				t.Fatalf("duplicate_order %q does not name the order %s", again.Error.Message, first.OrderID)
			}
		})
	}
}

// TestIdempotencyKey answers a retry with the first answer, whatever it
// was, and refuses the key with another body or a bad header.
func TestIdempotencyKey(t *testing.T) {
	for _, tt := range []struct{ strategy, placed, final string }{
		{"conditional", "awaiting_payment", "created"},
		{"async", "pending", "pending"},
	} {
		t.Run(tt.strategy, func(t *testing.T) { testIdempotencyKey(t, tt.strategy, tt.placed, tt.final) })
	}
}

func testIdempotencyKey(t *testing.T, strategyName, placed, final string) {
	api := newTestAPI(t, apiOptions{strategy: strategyName})
	vid := api.createSale(1, `"payment_window_seconds":60`)
	other := api.createSale(5, "")
	alice, bob := api.userToken(1), api.userToken(2)
	first := api.order(alice, vid, "", "Idempotency-Key", "k1")
	wantOrder(t, first, 1, placed)
	for _, body := range []string{"", `{"quantity":1}`} {
		if again := api.order(alice, vid, body, "Idempotency-Key", "k1"); again != first {
			t.Fatalf("the same key again (body %q): %+v; want %+v", body, again, first)
		}
	}
	wantRefusal(t, api.order(alice, vid, `{"quantity":2}`, "Idempotency-Key", "k1"), http.StatusBadRequest, flashsale.EInvalid)

	// A refusal is answered again, even once it would not be.
	soldOut := api.order(bob, vid, "", "Idempotency-Key", "k1")
	wantRefusal(t, soldOut, http.StatusConflict, flashsale.ESoldOut)
	if a := api.cancel(alice, first.OrderID); a.Status != "cancelled" {
		t.Fatalf("cancel: %+v", a)
	}
	if again := api.order(bob, vid, "", "Idempotency-Key", "k1"); again != soldOut {
		t.Fatalf("bob's key again, with a unit back on sale: %+v; want the first answer %+v", again, soldOut)
	}
	waitOrder(t, api, bob, vid)

	// A key is the buyer's on one voucher.
	wantOrder(t, api.order(alice, other, "", "Idempotency-Key", "k1"), 1, final)
	for _, tt := range []struct {
		name   string
		header []string
	}{
		{"empty", []string{"Idempotency-Key", ""}},
		{"white space", []string{"Idempotency-Key", "  "}},
		{"256 bytes", []string{"Idempotency-Key", strings.Repeat("k", 256)}},
		{"two", []string{"Idempotency-Key", "a", "Idempotency-Key", "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := api.order(api.userToken(9), other, "", tt.header...)
			wantRefusal(t, a, http.StatusBadRequest, flashsale.EInvalid)
		})
	}
	wantOrder(t, api.order(api.userToken(9), other, "", "Idempotency-Key", strings.Repeat("k", 255)), 1, final)
	waitPersisted(t, api, other, 2)
	if a := api.audit(other); a.Orders != 2 {
		t.Fatalf("refused keys placed orders: %+v", a)
	}
}

// TestLimitAtOnce sends a buyer's orders at once to two instances: they
// take the limit, and no more.
func TestLimitAtOnce(t *testing.T) {
	for _, name := range []string{"conditional", "async"} {
		t.Run(name, func(t *testing.T) {
			instances := twoInstances(t, name)
			first := instances[0]
			vid := first.createSale(100, `"limit_per_buyer":5`)
			tok := first.userToken(7)
			answers := make([]answer, 12)
			atOnce(len(answers), func(i int) { answers[i] = instances[i%2].order(tok, vid, `{"quantity":2}`) })
			units := 0
			for _, a := range answers {
				switch {
				case a.Code == http.StatusOK:
					units += a.Quantity
				case a.Error.Code != flashsale.ELimitReached:
					t.Fatalf("answer %+v; want an order or limit_reached", a)
				}
			}
			if units != 4 {
				t.Fatalf("the buyer got %d units; want 4 (two orders of 2 within the limit of 5)", units)
			}
			waitPersisted(t, first, vid, 2)
			if a := first.audit(vid); a.Units != 4 || a.Remaining != 96 || a.DuplicateBuyers != 0 {
				t.Fatalf("audit %+v", a)
			}
		})
	}
}

// TestIdempotencyKeyAtOnce sends one request with one key many times at
// once to two instances: one order, and every answer names it.
func TestIdempotencyKeyAtOnce(t *testing.T) {
	for _, name := range []string{"conditional", "async"} {
		t.Run(name, func(t *testing.T) {
			instances := twoInstances(t, name)
			first := instances[0]
			vid := first.createSale(10, `"limit_per_buyer":5,"payment_window_seconds":60`)
			tok := first.userToken(7)
			answers := make([]answer, 16)
			atOnce(len(answers), func(i int) {
				answers[i] = instances[i%2].order(tok, vid, `{"quantity":2}`, "Idempotency-Key", "at-once")
			})
			for i, a := range answers {
				if a.Code != http.StatusOK || a.OrderID != answers[0].OrderID || a.Quantity != 2 {
					t.Fatalf("answer %d: %+v; answer 0: %+v; want one order", i, a, answers[0])
				}
			}
			waitPersisted(t, first, vid, 1)
			if a := first.audit(vid); a.Orders != 1 || a.Units != 2 || a.Remaining != 8 {
				t.Fatalf("audit %+v; want one order of 2", a)
			}
		})
	}
}

// waitPersisted waits until the voucher has n live orders in MySQL (the
// async consumer persists them after the answer).
func waitPersisted(t *testing.T, api *testAPI, voucher string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for api.audit(voucher).Orders < n {
		if time.Now().After(deadline) {
			t.Fatalf("voucher %s: %+v; want %d orders persisted", voucher, api.audit(voucher), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// twoInstances returns two instances of the strategy on one MySQL
// database and Redis prefix.
func twoInstances(t *testing.T, strategyName string) []*testAPI {
	first := newTestAPI(t, apiOptions{strategy: strategyName})
	return []*testAPI{first, newTestAPI(t, apiOptions{strategy: strategyName, share: first})}
}

// atOnce runs f(0) to f(n-1) in goroutines released together, and waits
// for them.
func atOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() { <-start; f(i) })
	}
	close(start)
	wg.Wait()
}

// TestVoucherOrdersCountsOrders: a voucher's "orders" counts the orders
// holding stock, not their units, whatever the strategy (async's from
// its gate while the voucher is loaded in Redis).
func TestVoucherOrdersCountsOrders(t *testing.T) {
	for _, name := range []string{"conditional", "async"} {
		t.Run(name, func(t *testing.T) {
			api := newTestAPI(t, apiOptions{strategy: name})
			vid := api.createSale(10, `"limit_per_buyer":3`)
			api.order(api.userToken(1), vid, `{"quantity":3}`)
			api.order(api.userToken(2), vid, `{"quantity":2}`)
			var v struct{ Remaining, Orders int }
			api.do("GET", "/api/vouchers/"+vid, "", "", &v)
			if v.Remaining != 5 || v.Orders != 2 {
				t.Fatalf("voucher %+v; want 5 left and 2 orders (of 5 units)", v)
			}
		})
	}
}
