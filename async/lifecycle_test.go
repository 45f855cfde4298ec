package async_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/lifecycle"
)

// windowVoucher creates a voucher on sale with the payment window, limit
// per buyer and shards, priced 500 cents.
func (e *env) windowVoucher(stock int, window time.Duration, limit, shards int) *flashsale.Voucher {
	e.T.Helper()
	v := &flashsale.Voucher{Title: "lifecycle", Stock: stock, PayValue: 500, BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour),
		PaymentWindowSeconds: int(window / time.Second), LimitPerBuyer: limit, Shards: shards}
	if err := e.Svc.CreateVoucher(context.Background(), v); err != nil {
		e.T.Fatalf("CreateVoucher: %v", err)
	}
	return v
}

// place orders q units for the user, failing the test unless accepted.
func (e *env) place(v *flashsale.Voucher, user int64, q int) *flashsale.Order {
	e.T.Helper()
	o, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: user, Quantity: q})
	if err != nil {
		e.T.Fatalf("PlaceOrder(user %d, quantity %d): %v", user, q, err)
	}
	return o
}

// placeEventually is place for a unit that comes back while the instance
// may still remember the voucher sold out: it tries until the notice of
// the return, or the end of that memory (Config.VerdictTTL), lets it in.
func (e *env) placeEventually(v *flashsale.Voucher, user int64, q int) *flashsale.Order {
	e.T.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		o, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: user, Quantity: q})
		if err == nil {
			return o
		}
		if asynctest.Code(err) != flashsale.ESoldOut || time.Now().After(deadline) {
			e.T.Fatalf("PlaceOrder(user %d, quantity %d): %v", user, q, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPendingOrdersPaidAndCancelled: an order still on its way to MySQL
// can be paid and cancelled; the gate persists it first, and the consumer
// later finds it there. The cancelled units are sold again at once.
func TestPendingOrdersPaidAndCancelled(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(2, time.Minute, 1, 1)
	paid, cancelled := e.place(v, 1, 1), e.place(v, 2, 1)
	if paid.Status != flashsale.StatusPending || paid.PayBy.IsZero() {
		t.Fatalf("placed %+v; want pending with a pay_by", paid)
	}
	if o, err := e.Svc.FindOrder(ctx, paid.ID); err != nil || o.Status != flashsale.StatusPending || !o.PayBy.Equal(paid.PayBy) {
		t.Fatalf("FindOrder before the consumer = %+v, %v; want pending, pay_by %v", o, err, paid.PayBy)
	}
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 3}); asynctest.Code(err) != flashsale.ESoldOut {
		t.Fatalf("a third buyer of 2 units: %v, want sold_out", err)
	}
	if o, err := e.Svc.PayOrder(ctx, flashsale.Payment{ID: "p1", OrderID: paid.ID, Amount: 500}); err != nil || o.Status != flashsale.StatusPaid {
		t.Fatalf("paying a pending order = %+v, %v; want paid", o, err)
	}
	if _, err := e.Svc.CancelOrder(ctx, cancelled.ID, 1); asynctest.Code(err) != flashsale.ENotFound {
		t.Fatalf("another buyer cancels: %v, want not_found", err)
	}
	if o, err := e.Svc.CancelOrder(ctx, cancelled.ID, 2); err != nil || o.Status != flashsale.StatusCancelled {
		t.Fatalf("cancelling a pending order = %+v, %v; want cancelled", o, err)
	}
	// The unit is back in Redis, and this instance, which cancelled it,
	// forgot the sell-out: the former buyer, or anyone, takes it at once.
	again := e.place(v, 2, 1)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 2)
	a, err := e.DB.AuditVoucher(ctx, v.ID)
	want := flashsale.Audit{Stock: 2, Remaining: 0, Orders: 2, Units: 2, DistinctBuyers: 2, Paid: 1, AwaitingPayment: 1, Cancelled: 1, ReturnedUnits: 1}
	if err != nil || a != want {
		t.Fatalf("audit = %+v, %v; want %+v", a, err, want)
	}
	if o, err := e.Svc.FindOrder(ctx, again.ID); err != nil || o.Status != flashsale.StatusAwaitingPayment {
		t.Fatalf("the unit bought again: %+v, %v; want awaiting payment", o, err)
	}
	if stock, initial, held := e.Snapshot(v.ID); stock != 0 || held != 2 || initial != 2 {
		t.Fatalf("Redis: stock %d, held %d, initial %d; want 0, 2, 2", stock, held, initial)
	}
}

// TestExpiredUnitsSoldAgain: orders left unpaid expire at pay_by, their
// units go back into the gate's stock once (the expirer of each of two
// instances runs), and other buyers take them.
func TestExpiredUnitsSoldAgain(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(4, time.Second, 2, 1)
	for u := int64(1); u <= 2; u++ {
		e.place(v, u, 2)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 2)
	var wg sync.WaitGroup
	runCtx, stop := context.WithCancel(ctx)
	for range 2 {
		life := lifecycle.New(e.DB, lifecycle.Config{Restocker: async.Returns(e.Client, e.Config()), Logger: e.Log})
		wg.Go(func() { _ = life.Run(runCtx, lifecycle.ExpirerConfig{Every: 20 * time.Millisecond}) })
	}
	defer func() { stop(); wg.Wait() }()
	e.WaitFor("4 units back in Redis", 10*time.Second, func() (bool, error) {
		stock, _, _ := e.Snapshot(v.ID)
		return stock == 4, nil
	})
	e.placeEventually(v, 3, 2) // once the return's notice reaches this instance
	e.place(v, 1, 2)           // a former buyer too
	if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 4}); asynctest.Code(err) != flashsale.ESoldOut {
		t.Fatalf("past the returned units: %v, want sold_out", err)
	}
	e.WaitDrained(v.ID, 2)
	a, err := e.DB.AuditVoucher(ctx, v.ID)
	if err != nil || a.Expired != 2 || a.ReturnedUnits != 4 || a.Units != 4 || a.Remaining != 0 || a.ReturnsPending != 0 {
		t.Fatalf("audit = %+v, %v; want 2 expired, 4 units returned and 4 sold again, none pending", a, err)
	}
}

// TestQuantityAndLimitAtTheGate: orders of several units, all or nothing,
// within the buyer's limit, and an idempotency key that placed an order
// answers with it.
func TestQuantityAndLimitAtTheGate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.windowVoucher(6, 0, 3, 1)
	tests := []struct {
		user int64
		q    int
		key  string
		want string
	}{
		{1, 4, "", flashsale.EInvalid},
		{1, 2, "k", ""},
		{1, 2, "", flashsale.ELimitReached},
		{1, 1, "", ""},
		{2, 3, "", ""},
		{3, 1, "", flashsale.ESoldOut},
		{1, 2, "k", ""}, // the key's order again, not a refusal
	}
	var keyed int64
	for i, tt := range tests {
		o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: tt.user, Quantity: tt.q, IdempotencyKey: tt.key})
		if asynctest.Code(err) != tt.want {
			t.Fatalf("request %d (user %d, quantity %d): %v, want %q", i, tt.user, tt.q, err, tt.want)
		}
		if tt.key != "" && err == nil {
			if keyed != 0 && o.ID != keyed {
				t.Fatalf("key k answered order %d, then %d", keyed, o.ID)
			}
			keyed = o.ID
		}
	}
	if stock, _, held := e.Snapshot(v.ID); stock != 0 || held != 6 {
		t.Fatalf("Redis: stock %d, held %d; want 0 and 6", stock, held)
	}
}

// TestShardedQuantityNeverUndersells: on a voucher of 3 shards, buyers
// ask for 1 to 5 units at once; every order succeeds while its units are
// left anywhere, so the sale ends with nothing left and nothing oversold.
func TestShardedQuantityNeverUndersells(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const stock = 300
	v := e.windowVoucher(stock, 0, 5, 3)
	var sold atomic.Int64
	var wg sync.WaitGroup
	for u := int64(1); u <= 200; u++ {
		wg.Go(func() {
			q := int(u%5) + 1
			o, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u, Quantity: q})
			switch asynctest.Code(err) {
			case "":
				sold.Add(int64(o.Quantity))
			case flashsale.ESoldOut, flashsale.EBusy:
			default:
				t.Errorf("user %d: %v", u, err)
			}
		})
	}
	wg.Wait()
	// Whatever is left is less than the smallest order some buyer still
	// wants: buy it unit by unit.
	for u := int64(1000); ; u++ {
		if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u}); err != nil {
			if asynctest.Code(err) != flashsale.ESoldOut {
				t.Fatal(err)
			}
			break
		}
		sold.Add(1)
	}
	if sold.Load() != stock {
		t.Fatalf("%d units sold of %d", sold.Load(), stock)
	}
	st, err := async.AuditState(ctx, e.Client, e.Prefix, v.ID) // a limit of 5: Held counted
	if err != nil || st.Stock != 0 || st.Held != stock {
		t.Fatalf("Redis: %+v, %v; want nothing left, %d held", st, err, stock)
	}
}
