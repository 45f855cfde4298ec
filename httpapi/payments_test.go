package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/httpapi"
)

// webhook posts body to the payment webhook with the signature header
// ("" for none).
func (api *testAPI) webhook(body, signature string) (*http.Response, []byte) {
	api.t.Helper()
	h := http.Header{"Content-Type": {"application/json"}}
	if signature != "" {
		h.Set(httpapi.SignatureHeader, signature)
	}
	return api.send("POST", "/api/payments", h, strings.NewReader(body))
}

// pay posts a payment of the order, signed now as the provider signs it.
func (api *testAPI) pay(order, paymentID string, amount int64) answer {
	api.t.Helper()
	body := fmt.Sprintf(`{"payment_id":%q,"order_id":%q,"amount":%d}`, paymentID, order, amount)
	res, data := api.webhook(body, httpapi.Sign([]byte(paymentSecret), []byte(body), time.Now()))
	return decodeAnswer(api.t, res, data)
}

// decodeAnswer decodes a webhook's answer.
func decodeAnswer(t testing.TB, res *http.Response, body []byte) answer {
	t.Helper()
	a := answer{Code: res.StatusCode}
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%d %q is not JSON: %v", res.StatusCode, body, err)
	}
	return a
}

// TestPaymentSignature refuses with 401 every request whose signature is
// missing, malformed, made with another secret or over another body, or
// timed more than 5 minutes from the server's clock; none pays.
func TestPaymentSignature(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createSale(1, `"payment_window_seconds":600,"pay_value":100`)
	o := api.order(api.userToken(1), vid, "")
	body := fmt.Sprintf(`{"payment_id":"p1","order_id":%q,"amount":100}`, o.OrderID)
	now := time.Now()
	good := httpapi.Sign([]byte(paymentSecret), []byte(body), now)
	ts := fmt.Sprintf("t=%d", now.Unix())
	for _, tt := range []struct{ name, signature string }{
		{"missing", ""},
		{"not the scheme", "sha256=" + strings.Repeat("ab", 32)},
		{"no timestamp", good[strings.Index(good, "v1="):]},
		{"no v1", ts},
		{"only a v0", strings.Replace(good, "v1=", "v0=", 1)},
		{"bad hex", ts + ",v1=zz" + strings.Repeat("0", 62)},
		{"truncated", good[:len(good)-2]},
		{"wrong secret", httpapi.Sign([]byte("another secret"), []byte(body), now)},
		{"another body", httpapi.Sign([]byte(paymentSecret), []byte(body+" "), now)},
		{"6 minutes old", httpapi.Sign([]byte(paymentSecret), []byte(body), now.Add(-6*time.Minute))},
		{"6 minutes ahead", httpapi.Sign([]byte(paymentSecret), []byte(body), now.Add(6*time.Minute))},
		{"timestamp changed", strings.Replace(good, ts, fmt.Sprintf("t=%d", now.Unix()-1), 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, data := api.webhook(body, tt.signature)
			wantRefusal(t, decodeAnswer(t, res, data), http.StatusUnauthorized, flashsale.EUnauthorized)
		})
	}
	if got := api.get(api.userToken(1), o.OrderID); got.Status != "awaiting_payment" {
		t.Fatalf("a refused webhook changed the order: %+v", got)
	}
	// Within the tolerance, and with a second v1 for another secret (the
	// provider rolling its secret), it pays.
	for _, sig := range []string{
		httpapi.Sign([]byte(paymentSecret), []byte(body), now.Add(-4*time.Minute)),
		ts + ",v1=" + strings.Repeat("00", 32) + "," + good[strings.Index(good, "v1="):],
	} {
		res, data := api.webhook(body, sig)
		if a := decodeAnswer(t, res, data); a.Code != http.StatusOK || a.Status != "paid" || a.OrderID != o.OrderID {
			t.Fatalf("signature %s: %+v", sig, a)
		}
	}
}

// TestPaymentWithoutSecret answers 503 while payments are not set up.
func TestPaymentWithoutSecret(t *testing.T) {
	api := newTestAPI(t, apiOptions{noPayments: true})
	vid := api.createSale(1, `"payment_window_seconds":600,"pay_value":100`)
	o := api.order(api.userToken(1), vid, "")
	wantRefusal(t, api.pay(o.OrderID, "p1", 100), http.StatusServiceUnavailable, flashsale.EUnavailable)
	if got := api.get(api.userToken(1), o.OrderID); got.Status != "awaiting_payment" {
		t.Fatalf("order %+v", got)
	}
}

// TestPayment pays an order and checks every other answer of the webhook:
// the amount, the body, a replay, another payment, closed orders.
func TestPayment(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createSale(10, `"payment_window_seconds":600,"limit_per_buyer":3,"pay_value":250`)
	alice := api.userToken(1)
	o := api.order(alice, vid, `{"quantity":2}`)
	signed := func(body string) answer {
		res, data := api.webhook(body, httpapi.Sign([]byte(paymentSecret), []byte(body), time.Now()))
		return decodeAnswer(t, res, data)
	}
	payment := func(order string) string { return `{"payment_id":"p1","order_id":` + order + `,"amount":500}` }
	for _, tt := range []struct{ name, body, message string }{
		{"amount for one unit", `{"payment_id":"p1","order_id":"` + o.OrderID + `","amount":250}`, "amount 250 does not match the order's price, 250 × 2 cents"},
		{"amount above", `{"payment_id":"p1","order_id":"` + o.OrderID + `","amount":501}`, "does not match"},
		{"amount negative", `{"payment_id":"p1","order_id":"` + o.OrderID + `","amount":-500}`, `field "amount"`},
		{"amount a fraction", `{"payment_id":"p1","order_id":"` + o.OrderID + `","amount":500.0}`, `field "amount" must be a whole number`},
		{"amount a string", `{"payment_id":"p1","order_id":"` + o.OrderID + `","amount":"500"}`, `field "amount" must be a JSON number`},
		{"amount missing", `{"payment_id":"p1","order_id":"` + o.OrderID + `"}`, `field "amount"`},
		{"payment_id missing", `{"order_id":"` + o.OrderID + `","amount":500}`, `field "payment_id"`},
		{"payment_id empty", `{"payment_id":"","order_id":"` + o.OrderID + `","amount":500}`, `field "payment_id"`},
		{"payment_id too long", `{"payment_id":"` + strings.Repeat("p", 256) + `","order_id":"` + o.OrderID + `","amount":500}`, `field "payment_id"`},
		{"order_id missing", `{"payment_id":"p1","amount":500}`, `field "order_id"`},
		{"order_id null", payment("null"), `field "order_id"`},
		{"order_id 007", payment(`"007"`), `field "order_id"`},
		{"order_id a fraction", payment(o.OrderID + ".0"), `field "order_id"`},
		{"order_id negative", payment("-" + o.OrderID), `field "order_id"`},
		{"order_id quoted twice", payment(`"\"` + o.OrderID + `\""`), `field "order_id"`},
		{"unknown field", `{"payment_id":"p1","order_id":"` + o.OrderID + `","amount":500,"status":"paid"}`, `unknown field "status"`},
		{"trailing data", payment(`"`+o.OrderID+`"`) + "{}", "single JSON object"},
		{"not JSON", `{"payment_id":`, "not valid JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := signed(tt.body)
			wantRefusal(t, a, http.StatusBadRequest, flashsale.EInvalid)
			if !strings.Contains(a.Error.Message, tt.message) {
				t.Fatalf("message %q does not say %q", a.Error.Message, tt.message)
			}
		})
	}
	wantRefusal(t, signed(payment(`"42"`)), http.StatusNotFound, flashsale.ENotFound)
	if got := api.get(alice, o.OrderID); got.Status != "awaiting_payment" || got.PayBy == "" {
		t.Fatalf("refused payments changed the order: %+v", got)
	}

	// Paid, with order_id as a string; the same payment again, with it as
	// a number, answers the same.
	for _, id := range []string{`"` + o.OrderID + `"`, o.OrderID} {
		a := signed(payment(id))
		if a.Code != http.StatusOK || a.OrderID != o.OrderID || a.Status != "paid" {
			t.Fatalf("payment with order_id %s: %+v", id, a)
		}
	}
	another := signed(`{"payment_id":"p2","order_id":"` + o.OrderID + `","amount":500}`)
	wantRefusal(t, another, http.StatusConflict, flashsale.EAlreadyPaid)
	if got := api.get(alice, o.OrderID); got.Status != "paid" || got.PayBy != "" || got.Quantity != 2 {
		t.Fatalf("GET a paid order: %+v", got)
	}

	// A cancelled order is never paid; nor is one without a payment step.
	c := api.order(api.userToken(2), vid, "")
	api.cancel(api.userToken(2), c.OrderID)
	wantRefusal(t, signed(`{"payment_id":"p3","order_id":"`+c.OrderID+`","amount":250}`), http.StatusConflict, flashsale.EOrderClosed)
	if got := api.get(api.userToken(2), c.OrderID); got.Status != "cancelled" {
		t.Fatalf("a payment of a cancelled order changed it: %+v", got)
	}
	free := api.createSale(1, `"pay_value":250`)
	f := api.order(alice, free, "")
	wantRefusal(t, signed(`{"payment_id":"p4","order_id":"`+f.OrderID+`","amount":250}`), http.StatusConflict, flashsale.EOrderClosed)
	if a := api.audit(vid); a.Paid != 1 || a.PaidAfterClose != 0 || a.Cancelled != 1 || a.Remaining != 8 {
		t.Fatalf("audit %+v; want one paid order of 2 and one cancelled", a)
	}
}

// TestPaymentRaces sends, at once on two instances, one payment many
// times (every answer is paid), several payments of one order (one pays,
// the others answer already_paid), and payments racing their orders'
// cancels (one of the two wins, the other is refused).
func TestPaymentRaces(t *testing.T) {
	instances := twoInstances(t, "conditional")
	first := instances[0]
	vid := first.createSale(20, `"payment_window_seconds":600,"pay_value":100`)
	place := func(user int64) string {
		o := first.order(first.userToken(user), vid, "")
		wantOrder(t, o, 1, "awaiting_payment")
		return o.OrderID
	}
	const n = 8
	same, several := place(1), place(2)
	raced := make([]string, n)
	for i := range raced {
		raced[i] = place(int64(10 + i))
	}
	answers := make([][4]answer, n)
	atOnce(4*n, func(j int) {
		i, k := j/4, j%4
		api, other := instances[i%2], instances[(i+1)%2]
		switch k {
		case 0:
			answers[i][k] = api.pay(same, "same", 100)
		case 1:
			answers[i][k] = api.pay(several, fmt.Sprint("p", i), 100)
		case 2:
			answers[i][k] = api.pay(raced[i], fmt.Sprint("r", i), 100)
		case 3:
			answers[i][k] = other.cancel(other.userToken(int64(10+i)), raced[i])
		}
	})
	paid, racedPaid := 0, 0
	for i, a := range answers {
		if a[0].Code != http.StatusOK || a[0].Status != "paid" {
			t.Errorf("the same payment, answer %d: %+v", i, a[0])
		}
		switch {
		case a[1].Code == http.StatusOK:
			paid++
		case a[1].Error.Code != flashsale.EAlreadyPaid:
			t.Errorf("one of several payments: %+v", a[1])
		}
		pay, cancel := a[2], a[3]
		switch {
		case pay.Code == http.StatusOK && cancel.Error.Code == flashsale.EAlreadyPaid:
			racedPaid++
		case cancel.Code == http.StatusOK && pay.Error.Code == flashsale.EOrderClosed:
		default:
			t.Errorf("order %d: payment %+v, cancel %+v; want one to win and the other refused", i, pay, cancel)
		}
	}
	if paid != 1 {
		t.Errorf("%d of %d payments of one order paid it; want 1", paid, n)
	}
	if a := first.audit(vid); a.PaidAfterClose != 0 || a.Paid != 2+racedPaid || a.Cancelled != n-racedPaid || a.Remaining != 20-a.Units {
		t.Fatalf("audit %+v; want %d paid, %d cancelled, none paid after its close", a, 2+racedPaid, n-racedPaid)
	}
}
