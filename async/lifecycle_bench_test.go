package async_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/store"
)

// BenchmarkMassExpiry sells 100,000 orders of one voucher with a payment
// window, sets every pay_by to the same instant, and runs two expirers
// (two instances' worth: each its own store pool) from then: it reports
// how long until every order is expired in MySQL and its unit back in
// Redis's stock. Run with -benchtime 1x.
func BenchmarkMassExpiry(b *testing.B) {
	const n = 100_000
	e := newEnv(b)
	ctx := context.Background()
	v := e.windowVoucher(n, 10*time.Minute, 1, 1)
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	placeMany(b, e, v.ID, 1, n, 64)
	e.WaitFor("every order in MySQL", 10*time.Minute, func() (bool, error) {
		a, err := e.DB.AuditVoucher(ctx, v.ID)
		return a.Orders == n, err
	})
	stop()
	due := time.Now().Add(2 * time.Second)
	if _, err := e.SQL.Exec("UPDATE orders SET pay_by = ? WHERE voucher_id = ?", due.UTC().Format("2006-01-02 15:04:05.000000"), v.ID); err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range 2 {
		db, err := store.Open(ctx, e.URL)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		life := lifecycle.New(db, lifecycle.Config{Restocker: async.Returns(e.Client, e.Config()), Logger: e.Log})
		wg.Go(func() { _ = life.Run(runCtx, lifecycle.ExpirerConfig{}) })
	}
	b.ResetTimer()
	e.WaitFor("every unit back", 10*time.Minute, func() (bool, error) {
		stock, _, _ := e.Snapshot(v.ID)
		return stock == n, nil
	})
	elapsed := time.Since(due)
	b.StopTimer()
	cancel()
	wg.Wait()
	a, err := e.DB.AuditVoucher(ctx, v.ID)
	if err != nil || a.Expired != n || a.ReturnsPending != 0 || a.Remaining != n {
		b.Fatalf("audit %+v, %v; want %d expired and returned", a, err, n)
	}
	b.ReportMetric(elapsed.Seconds(), "s-to-return-all")
	b.ReportMetric(n/elapsed.Seconds(), "returns/s")
}

// placeMany places one order of the voucher for each of n users from
// first, with the given concurrency, failing on any refusal.
func placeMany(b testing.TB, e *env, voucherID, first int64, n, concurrency int) {
	var next atomic.Int64
	next.Store(first)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for u := next.Add(1) - 1; u < first+int64(n); u = next.Add(1) - 1 {
				if _, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: u}); err != nil {
					b.Errorf("PlaceOrder(user %d): %v", u, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkReturnLatency measures how soon a unit is buyable again after
// its order's pay_by while a sale runs: 500 orders with a payment window
// of three seconds go unpaid, one instance expires them (every 100 ms),
// and 32 buyers keep ordering (a new buyer each attempt; a winner pays
// 300 ms later, as a person would). The k-th unit sold again is matched
// with the k-th pay_by; the report gives the quantiles of the difference.
// The consumer runs with the service's default timeouts. Run with
// -benchtime 1x.
func BenchmarkReturnLatency(b *testing.B) {
	const n = 500
	e := newEnv(b)
	ctx := context.Background()
	v := e.windowVoucher(n, 3*time.Second, 1, 1)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc := e.ConsumerConfig()
	cc.ClaimIdle = 30 * time.Second // serve's default: a batch may take 10 s
	e.Run(consume.New(e.Client, e.DB, cc))
	life := lifecycle.New(e.DB, lifecycle.Config{Restocker: async.Returns(e.Client, e.Config()), Logger: e.Log})
	go func() { _ = life.Run(runCtx, lifecycle.ExpirerConfig{}) }()
	var payBys []time.Time
	for u := int64(1); u <= n; u++ {
		payBys = append(payBys, e.place(v, u, 1).PayBy)
	}
	b.ResetTimer()
	resold := resellUntil(e, v.ID, n)
	b.StopTimer()
	slices.SortFunc(payBys, func(a, b time.Time) int { return a.Compare(b) })
	lags := make([]time.Duration, n)
	for k := range lags {
		lags[k] = resold[k].Sub(payBys[k])
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lags[n/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lags[n*99/100].Milliseconds()), "p99-ms")
	b.ReportMetric(float64(lags[n-1].Milliseconds()), "max-ms")
}

// resellUntil has 32 buyers order the voucher, each attempt a new buyer,
// until n units are sold; each winner pays 300 ms later. It returns when
// each unit was sold, in order, once every payment is in.
func resellUntil(e *env, voucherID int64, n int) []time.Time {
	var mu sync.Mutex
	var sold []time.Time
	var next atomic.Int64
	next.Store(1_000_000)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(sold) >= n
				mu.Unlock()
				if done {
					return
				}
				o, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: next.Add(1)})
				if err != nil {
					if asynctest.Code(err) != flashsale.ESoldOut {
						e.T.Errorf("PlaceOrder: %v", err)
						return
					}
					time.Sleep(5 * time.Millisecond)
					continue
				}
				at := time.Now()
				mu.Lock()
				sold = append(sold, at)
				mu.Unlock()
				wg.Go(func() {
					time.Sleep(300 * time.Millisecond)
					if _, err := e.Svc.PayOrder(context.Background(), flashsale.Payment{ID: "p" + itoa(o.ID), OrderID: o.ID, Amount: 500}); err != nil {
						e.T.Errorf("PayOrder: %v", err)
					}
				})
			}
		})
	}
	wg.Wait()
	slices.SortFunc(sold, func(a, b time.Time) int { return a.Compare(b) })
	return sold[:n]
}
