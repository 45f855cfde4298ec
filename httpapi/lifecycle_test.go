package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lifecycle"
)

// cancel cancels the order with the buyer's token.
func (api *testAPI) cancel(token, order string) answer {
	api.t.Helper()
	return api.call("POST", "/api/orders/"+order+"/cancel", token, nil)
}

// get finds the order with the token.
func (api *testAPI) get(token, order string) answer {
	api.t.Helper()
	return api.call("GET", "/api/orders/"+order, token, nil)
}

// expire moves the clock d forward and expires what is due then: it
// returns once no order is due, whichever expirer (this call's or the one
// running in the background) expired it.
func (api *testAPI) expire(d time.Duration) {
	api.t.Helper()
	api.clock.Advance(d)
	now := api.clock.Now()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if err := api.life.ExpireDue(context.Background(), lifecycle.ExpirerConfig{}); err != nil {
			api.t.Fatal(err)
		}
		next, err := api.db.NextDue(context.Background())
		if err != nil {
			api.t.Fatal(err)
		}
		if next.IsZero() || next.After(now) {
			return
		}
		if time.Now().After(deadline) {
			api.t.Fatalf("an order due at %s is still awaiting payment", next)
		}
	}
}

// wantPayBy fails unless the order awaits payment until about window from
// now (by the test's clock), written in RFC 3339.
func wantPayBy(t *testing.T, api *testAPI, a answer, window time.Duration) {
	t.Helper()
	payBy, err := time.Parse(time.RFC3339, a.PayBy)
	if err != nil {
		t.Fatalf("pay_by of %+v: %v", a, err)
	}
	if d := payBy.Sub(api.clock.Now()); d <= window-time.Minute || d > window {
		t.Fatalf("pay_by %s is %s away; want about %s", a.PayBy, d, window)
	}
}

// TestCancelOrder cancels with every answer the contract names, for a
// synchronous strategy and for async.
func TestCancelOrder(t *testing.T) {
	for _, tt := range []struct{ strategy, placed string }{{"conditional", "awaiting_payment"}, {"async", "pending"}} {
		t.Run(tt.strategy, func(t *testing.T) { testCancelOrder(t, tt.strategy, tt.placed) })
	}
}

func testCancelOrder(t *testing.T, strategyName, placed string) {
	api := newTestAPI(t, apiOptions{strategy: strategyName})
	vid := api.createSale(3, `"payment_window_seconds":600,"limit_per_buyer":2,"pay_value":150`)
	alice, bob := api.userToken(1), api.userToken(2)
	o := api.order(alice, vid, `{"quantity":2}`)
	wantOrder(t, o, 2, placed)
	wantPayBy(t, api, o, 10*time.Minute)
	got := api.get(alice, o.OrderID)
	if got.Quantity != 2 || (got.Status != placed && got.Status != "awaiting_payment") {
		t.Fatalf("GET %+v; want 2 units, %s or awaiting_payment", got, placed)
	}
	wantPayBy(t, api, got, 10*time.Minute)

	wantRefusal(t, api.cancel(bob, o.OrderID), http.StatusNotFound, flashsale.ENotFound)
	wantRefusal(t, api.cancel("", o.OrderID), http.StatusUnauthorized, flashsale.EUnauthorized)
	wantRefusal(t, api.cancel(adminToken, o.OrderID), http.StatusUnauthorized, flashsale.EUnauthorized)
	wantRefusal(t, api.cancel(alice, "42"), http.StatusNotFound, flashsale.ENotFound)
	wantRefusal(t, api.cancel(alice, "007"), http.StatusBadRequest, flashsale.EInvalid)
	for range 2 { // the same cancel again answers the same
		c := api.cancel(alice, o.OrderID)
		if c.Code != http.StatusOK || c.OrderID != o.OrderID || c.Status != "cancelled" || c.Quantity != 2 || c.PayBy != "" {
			t.Fatalf("cancel: %+v; want the order, cancelled, without pay_by", c)
		}
	}
	if got := api.get(alice, o.OrderID); got.Status != "cancelled" || got.PayBy != "" {
		t.Fatalf("GET a cancelled order: %+v", got)
	}
	if a := api.audit(vid); a.Remaining != 3 || a.Cancelled != 1 || a.ReturnedUnits != 2 {
		t.Fatalf("audit after the cancel: %+v; want the 2 units back", a)
	}
	// The units are on sale again, and the buyer's limit free.
	wantOrder(t, api.order(alice, vid, `{"quantity":2}`), 2, placed)
	paid := api.order(bob, vid, "")
	wantOrder(t, paid, 1, placed)
	if a := api.pay(paid.OrderID, "pay-bob", 150); a.Status != "paid" {
		t.Fatalf("pay: %+v", a)
	}
	wantRefusal(t, api.cancel(bob, paid.OrderID), http.StatusConflict, flashsale.EAlreadyPaid)

	final := api.createSale(3, "")
	created := api.order(alice, final, "")
	if created.PayBy != "" {
		t.Fatalf("an order without a payment step has pay_by: %+v", created)
	}
	waitPersisted(t, api, final, 1)
	wantRefusal(t, api.cancel(alice, created.OrderID), http.StatusConflict, flashsale.EOrderClosed)
	if got := api.get(alice, created.OrderID); got.Status != "created" || got.PayBy != "" {
		t.Fatalf("GET an order without a payment step: %+v", got)
	}
}

// TestCancelPendingOrder cancels, and pays, async orders the consumer has
// not persisted: both count.
func TestCancelPendingOrder(t *testing.T) {
	api := newTestAPI(t, apiOptions{strategy: "async", noConsumer: true})
	vid := api.createSale(5, `"payment_window_seconds":600,"limit_per_buyer":2,"pay_value":100`)
	alice, bob := api.userToken(1), api.userToken(2)
	o := api.order(alice, vid, `{"quantity":2}`)
	wantOrder(t, o, 2, "pending")
	if got := api.get(alice, o.OrderID); got.Status != "pending" || got.Quantity != 2 {
		t.Fatalf("GET a pending order: %+v", got)
	} else {
		wantPayBy(t, api, got, 10*time.Minute)
	}
	wantRefusal(t, api.cancel(bob, o.OrderID), http.StatusNotFound, flashsale.ENotFound)
	if c := api.cancel(alice, o.OrderID); c.Code != http.StatusOK || c.Status != "cancelled" {
		t.Fatalf("cancel a pending order: %+v", c)
	}
	p := api.order(bob, vid, `{"quantity":2}`)
	wantOrder(t, p, 2, "pending")
	if a := api.pay(p.OrderID, "pay-pending", 200); a.Code != http.StatusOK || a.Status != "paid" {
		t.Fatalf("pay a pending order: %+v", a)
	}
	if got := api.get(bob, p.OrderID); got.Status != "paid" || got.PayBy != "" {
		t.Fatalf("GET a paid order: %+v", got)
	}
	if a := api.audit(vid); a.Cancelled != 1 || a.Paid != 1 || a.Remaining != 3 {
		t.Fatalf("audit %+v; want one cancelled and one paid order, 3 left", a)
	}
}

// TestExpiredOrder closes an order at its pay_by: cancel and payment
// answer order_closed, and it stays expired.
func TestExpiredOrder(t *testing.T) {
	for _, name := range []string{"conditional", "async"} {
		t.Run(name, func(t *testing.T) {
			api := newTestAPI(t, apiOptions{strategy: name})
			vid := api.createSale(1, `"payment_window_seconds":60,"pay_value":100`)
			alice := api.userToken(1)
			o := api.order(alice, vid, "")
			waitPersisted(t, api, vid, 1)
			wantRefusal(t, api.order(api.userToken(2), vid, ""), http.StatusConflict, flashsale.ESoldOut)
			api.expire(61 * time.Second)
			if got := api.get(alice, o.OrderID); got.Status != "expired" || got.PayBy != "" {
				t.Fatalf("GET an expired order: %+v", got)
			}
			wantRefusal(t, api.cancel(alice, o.OrderID), http.StatusConflict, flashsale.EOrderClosed)
			wantRefusal(t, api.pay(o.OrderID, "late", 100), http.StatusConflict, flashsale.EOrderClosed)
			if got := api.get(alice, o.OrderID); got.Status != "expired" {
				t.Fatalf("a refused payment changed the order: %+v", got)
			}
			if a := api.audit(vid); a.Expired != 1 || a.Remaining != 1 || a.PaidAfterClose != 0 {
				t.Fatalf("audit %+v; want one expired order, its unit back", a)
			}
			waitOrder(t, api, api.userToken(3), vid) // the unit sells again
		})
	}
}

// waitOrder places an order until it is taken: the async gate remembers a
// sold-out voucher for a moment after a unit comes back.
func waitOrder(t *testing.T, api *testAPI, token, voucher string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a := api.order(token, voucher, "")
		if a.Code == http.StatusOK {
			return
		}
		if a.Error.Code != flashsale.ESoldOut || time.Now().After(deadline) {
			t.Fatalf("order after a return: %+v", a)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
