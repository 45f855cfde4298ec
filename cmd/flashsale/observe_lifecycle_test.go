package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/internal/testenv"
)

// paymentSecret is the webhook secret the tests' serve reads from the file
// paymentSecretFile writes (with a newline, which serve drops).
const paymentSecret = "whsec-serve-test"

// paymentSecretFile writes paymentSecret to a file for
// --payment-secret-file and returns its path.
func paymentSecretFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "payment-secret")
	if err := os.WriteFile(path, []byte(paymentSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// pay sends the payment provider's webhook for the order, signed now, and
// returns the status.
func pay(t *testing.T, url, order, paymentID string, amount int) int {
	t.Helper()
	body := fmt.Sprintf(`{"payment_id":%q,"order_id":%q,"amount":%d}`, paymentID, order, amount)
	req, err := http.NewRequest("POST", url+"/api/payments", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(httpapi.SignatureHeader, httpapi.Sign([]byte(paymentSecret), []byte(body), time.Now()))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// placeOrder places an order of the voucher for the user and returns its
// id.
func placeOrder(t *testing.T, url, voucher string, user int64) string {
	t.Helper()
	var o struct {
		OrderID string `json:"order_id"`
	}
	if code := call(t, "POST", url+"/api/vouchers/"+voucher+"/orders", userToken(t, user), `{"quantity":1}`, &o); code != http.StatusOK {
		t.Fatalf("order of user %d: %d", user, code)
	}
	return o.OrderID
}

// TestOrderLifeObserved runs serve with payments set up and pays, cancels
// and lets expire orders of a synchronous strategy, and checks what the
// scrape says of them: payments and cancels by outcome (a bad signature
// too), the expirer's lag and returns, and the orders by status per
// voucher.
func TestOrderLifeObserved(t *testing.T) {
	_, prefix := testenv.Redis(t)
	url, _ := startServe(t, "--strategy", "conditional", "--redis", "redis://"+testenv.RedisAddr()+"/0", "--redis-prefix", prefix,
		"--db", testenv.MySQLURL(t), "--payment-secret-file", paymentSecretFile(t), "--expire-every", "50ms", "--public-metrics")
	create := func(window int) string {
		var v struct{ ID string }
		body := strings.TrimSuffix(voucherBody(5), "}") + fmt.Sprintf(`,"payment_window_seconds":%d,"pay_value":300}`, window)
		if code := call(t, "POST", url+"/api/vouchers", serveAdmin, body, &v); code != http.StatusCreated {
			t.Fatalf("create voucher: %d", code)
		}
		return v.ID
	}
	sale, short := create(600), create(1)
	paid, cancelled := placeOrder(t, url, sale, 1), placeOrder(t, url, sale, 2)
	expiring := placeOrder(t, url, short, 3)
	if code := pay(t, url, paid, "pay-1", 300); code != http.StatusOK {
		t.Fatalf("pay: %d", code)
	}
	if code := pay(t, url, paid, "pay-2", 300); code != http.StatusConflict {
		t.Fatalf("another payment of a paid order: %d, want 409", code)
	}
	if code := call(t, "POST", url+"/api/payments", "", `{"payment_id":"x","order_id":"1","amount":1}`, nil); code != http.StatusUnauthorized {
		t.Fatalf("an unsigned payment: %d, want 401", code)
	}
	if code := call(t, "POST", url+"/api/orders/"+cancelled+"/cancel", userToken(t, 2), "", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	want := []string{
		`flashsale_payments_total{outcome="paid"} 1`,
		`flashsale_payments_total{outcome="already_paid"} 1`,
		`flashsale_payments_total{outcome="unauthorized"} 1`,
		`flashsale_cancels_total{outcome="cancelled"} 1`,
		`flashsale_orders_expired_total 1`,
		`flashsale_returned_units_total 2`,
		`flashsale_order_expiry_lag_seconds_count 1`,
		`flashsale_voucher_orders_by_status{status="paid",voucher="` + sale + `"} 1`,
		`flashsale_voucher_orders_by_status{status="cancelled",voucher="` + sale + `"} 1`,
		`flashsale_voucher_orders_by_status{status="expired",voucher="` + short + `"} 1`,
		`flashsale_voucher_returned_units{voucher="` + sale + `"} 1`,
		`flashsale_voucher_returned_units{voucher="` + short + `"} 1`,
		`flashsale_voucher_paid_after_close{voucher="` + sale + `"} 0`,
		`flashsale_voucher_returns_pending{voucher="` + short + `"} 0`,
	}
	// The order expires a second after it was placed, and the sampler
	// reads the figures every 2 s.
	deadline := time.Now().Add(30 * time.Second)
	for {
		scrape, missing := get(t, url+"/metrics"), []string{}
		for _, w := range want {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(w) + `$`).MatchString(scrape) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 {
			promtool(t, scrape, "check", "metrics")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s never expired, or the scrape lacks %v:\n%s", expiring, missing, scrape)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
