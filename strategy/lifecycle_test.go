package strategy_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/strategy"
)

// safe lists the strategies that sell exactly the stock.
var safe = []string{"conditional", "lock", "stocklock", "batch"}

// windowVoucher creates a voucher on sale now with the payment window and
// limit per buyer, and returns it.
func (f *fixture) windowVoucher(t testing.TB, stock int, window time.Duration, limit int) *flashsale.Voucher {
	t.Helper()
	v := &flashsale.Voucher{Title: "t", Stock: stock, PayValue: 500, BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour),
		PaymentWindowSeconds: int(window / time.Second), LimitPerBuyer: limit}
	if err := strategy.NewVoucherService(f.db, f.ids, "conditional").CreateVoucher(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	return v
}

// lifecycleStrategy returns the named strategy with a lifecycle whose clock
// the test moves.
func (f *fixture) lifecycleStrategy(t testing.TB, name string, clock *atomic.Int64) (flashsale.OrderService, *lifecycle.Service) {
	t.Helper()
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	life := lifecycle.New(f.db, lifecycle.Config{Now: now})
	s, err := strategy.New(name, strategy.Config{DB: f.db, IDs: f.ids, Locks: f.locks, Now: now, Lifecycle: life})
	if err != nil {
		t.Fatal(err)
	}
	return s, life
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if got := flashsale.ErrorCode(err); got != code {
		t.Fatalf("error code %q (%v), want %q", got, err, code)
	}
}

// TestOrderLifecycle walks every safe strategy through an order's life:
// awaiting payment with a pay_by, paid, cancelled and expired, the units of
// the last two back on sale and bought again, by anyone, the former buyer
// too.
func TestOrderLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, name := range safe {
		t.Run(name, func(t *testing.T) {
			var clock atomic.Int64
			clock.Store(time.Now().UnixNano())
			s, life := f.lifecycleStrategy(t, name, &clock)
			v := f.windowVoucher(t, 3, time.Minute, 1)
			var orders []*flashsale.Order
			for u := int64(1); u <= 3; u++ {
				o, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
				if err != nil || o.Status != flashsale.StatusAwaitingPayment || o.PayBy.IsZero() {
					t.Fatalf("PlaceOrder = %+v, %v; want awaiting payment with a pay_by", o, err)
				}
				orders = append(orders, o)
			}
			_, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 4})
			wantCode(t, err, flashsale.ESoldOut)
			if _, err := s.PayOrder(ctx, flashsale.Payment{ID: "pay-" + name, OrderID: orders[0].ID, Amount: 500}); err != nil {
				t.Fatal(err)
			}
			if o, err := s.CancelOrder(ctx, orders[1].ID, 2); err != nil || o.Status != flashsale.StatusCancelled {
				t.Fatalf("CancelOrder = %+v, %v; want cancelled", o, err)
			}
			// The cancelled unit is back: the former buyer takes it.
			if _, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 2}); err != nil {
				t.Fatalf("buying the cancelled unit again: %v", err)
			}
			// Past pay_by the unpaid two expire (the third and the one bought
			// again), and others buy their units.
			clock.Add(int64(time.Minute + time.Second))
			if err := life.ExpireDue(ctx, lifecycle.ExpirerConfig{}); err != nil {
				t.Fatal(err)
			}
			if o, err := s.FindOrder(ctx, orders[2].ID); err != nil || o.Status != flashsale.StatusExpired {
				t.Fatalf("after pay_by: %+v, %v; want expired", o, err)
			}
			for u := int64(5); u <= 6; u++ {
				if _, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: u}); err != nil {
					t.Fatalf("buying an expired unit again: %v", err)
				}
			}
			_, err = s.PayOrder(ctx, flashsale.Payment{ID: "late-" + name, OrderID: orders[2].ID, Amount: 500})
			wantCode(t, err, flashsale.EOrderClosed)
			got, err := f.db.FindVoucher(ctx, v.ID)
			if err != nil || got.Remaining != 0 || got.Orders != 3 {
				t.Fatalf("voucher %+v, %v; want 3 live orders and nothing left", got, err)
			}
		})
	}
}

// TestLimitAndQuantityUnderConcurrency has buyers ask for 1 to 3 units of
// a voucher with a limit of 4 each, several requests per buyer at once, on
// every safe strategy: no buyer holds more than 4 units, and exactly the
// stock is sold.
func TestLimitAndQuantityUnderConcurrency(t *testing.T) {
	const stock, buyers, tries = 60, 15, 4
	f := newFixture(t)
	ctx := context.Background()
	for _, name := range safe {
		t.Run(name, func(t *testing.T) {
			s := f.strategy(t, name, 0)
			v := f.windowVoucher(t, stock, 0, 4)
			var sold atomic.Int64
			var wg sync.WaitGroup
			for u := range buyers * tries {
				wg.Go(func() {
					q := u%3 + 1
					o, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: int64(u%buyers + 1), Quantity: q})
					switch flashsale.ErrorCode(err) {
					case "":
						sold.Add(int64(o.Quantity))
					case flashsale.ELimitReached, flashsale.ESoldOut, flashsale.EBusy:
					default:
						t.Errorf("order of %d: %v", q, err)
					}
				})
			}
			wg.Wait()
			for u := int64(1); u <= buyers; u++ {
				units, _, err := f.db.BuyerUnits(ctx, v.ID, u)
				if err != nil || units > 4 {
					t.Errorf("buyer %d holds %d units (%v); the limit is 4", u, units, err)
				}
			}
			got, err := f.db.Voucher(ctx, v.ID)
			if err != nil || int64(stock-got.Remaining) != sold.Load() {
				t.Fatalf("remaining %d after %d units answered sold (%v); want stock - remaining = sold", got.Remaining, sold.Load(), err)
			}
		})
	}
}

// TestQuantityRefusals checks the answers to quantities outside 1 to the
// limit, and to a buyer at the limit.
func TestQuantityRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, name := range safe {
		t.Run(name, func(t *testing.T) {
			s := f.strategy(t, name, 0)
			v := f.windowVoucher(t, 10, 0, 3)
			one := f.windowVoucher(t, 10, 0, 1)
			tests := []struct {
				voucher *flashsale.Voucher
				user    int64
				q       int
				want    string
			}{
				{v, 1, 4, flashsale.EInvalid},
				{v, 1, -1, flashsale.EInvalid},
				{v, 1, 2, ""},
				{v, 1, 2, flashsale.ELimitReached},
				{v, 1, 1, ""},
				{one, 1, 1, ""},
				{one, 1, 1, flashsale.EDuplicateOrder},
				{v, 2, 3, ""},
				{v, 3, 3, ""},
				{v, 4, 2, flashsale.ESoldOut}, // 1 left: all or nothing
				{v, 4, 1, ""},
			}
			for i, tt := range tests {
				_, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: tt.voucher.ID, UserID: tt.user, Quantity: tt.q})
				if got := flashsale.ErrorCode(err); got != tt.want {
					t.Fatalf("request %d (user %d, quantity %d): %q (%v), want %q", i, tt.user, tt.q, got, err, tt.want)
				}
			}
		})
	}
}

// TestUnsafeStrategiesRefuseWindows: the lab-only strategies refuse what
// they cannot keep.
func TestUnsafeStrategiesRefuseWindows(t *testing.T) {
	f := newFixture(t)
	for _, name := range strategy.Unsafe {
		v := &flashsale.Voucher{Title: "t", Stock: 5, BeginTime: time.Now(), EndTime: time.Now().Add(time.Hour), PaymentWindowSeconds: 60}
		err := strategy.NewVoucherService(f.db, f.ids, name).CreateVoucher(context.Background(), v)
		wantCode(t, err, flashsale.EInvalid)
		v.PaymentWindowSeconds, v.LimitPerBuyer = 0, 2
		err = strategy.NewVoucherService(f.db, f.ids, name).CreateVoucher(context.Background(), v)
		wantCode(t, err, flashsale.EInvalid)
	}
}
