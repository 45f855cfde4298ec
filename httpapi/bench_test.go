package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// BenchmarkHotVoucher measures order attempts per second through HTTP on
// one hot voucher, and GET /healthz of the same server under the same load
// (same client, same concurrency, same number of requests) in the same
// run, so the ratio travels between machines. Shapes:
//
//   - sale: stock 1,000 and every buyer clicks five times, most attempts
//     after the sell-out, as in a real flash sale;
//   - gate: every buyer clicks five times but the stock never runs out, so
//     every attempt is decided by the strategy (async: the Redis gate), one
//     in five an order and the rest repeats;
//   - accept: stock for every attempt and a new buyer each time, so every
//     attempt is an order (orders/s).
//
// The servers run on the real Redis and MariaDB; the load runs in the same
// process (2 cores shared), which costs the same for both measurements.
// Rates on a shared machine are noisy; CPU per request is less so:
// cpu-µs/healthz and cpu-µs/attempt are this process's CPU time (server,
// load generator and, for async, the consumer) per request of each phase,
// and redis-µs/attempt Redis's, read from INFO cpu (meaningful only on a
// Redis nobody else uses: FLASHSALE_TEST_REDIS=127.0.0.1:<port> of a
// private redis-server).
func BenchmarkHotVoucher(b *testing.B) {
	shapes := []struct {
		strategy, shape string
		stock           func(n int) int
		users           func(n int) int
	}{
		{"async", "sale", func(int) int { return 1000 }, func(n int) int { return max(n/5, 1) }},
		{"async", "gate", func(n int) int { return n }, func(n int) int { return max(n/5, 1) }},
		{"async", "accept", func(n int) int { return n }, func(n int) int { return n }},
		{"conditional", "sale", func(int) int { return 1000 }, func(n int) int { return max(n/5, 1) }},
		{"conditional", "accept", func(n int) int { return n }, func(n int) int { return n }},
		{"lock", "sale", func(int) int { return 1000 }, func(n int) int { return max(n/5, 1) }},
		{"lock", "accept", func(n int) int { return n }, func(n int) int { return n }},
		{"batch", "sale", func(int) int { return 1000 }, func(n int) int { return max(n/5, 1) }},
		{"batch", "accept", func(n int) int { return n }, func(n int) int { return n }},
	}
	for _, s := range shapes {
		b.Run(s.strategy+"/"+s.shape, func(b *testing.B) {
			benchOrders(b, newTestAPI(b, apiOptions{strategy: s.strategy}), s.stock(b.N), s.users(b.N))
		})
	}
}

// benchOrders measures b.N GET /healthz and b.N order attempts on a new
// voucher with the stock by the users (round robin), on one server, and
// reports both rates and their ratio. The two alternate in benchRounds
// rounds (healthz, then the next attempts), so a burst of other work on a
// shared machine weighs on both alike.
func benchOrders(b *testing.B, api *testAPI, stock, users int) {
	benchOrdersOn(b, api, api.createVoucher(max(stock, 1)), users)
}

// benchOrdersOn is benchOrders on the voucher vid.
func benchOrdersOn(b *testing.B, api *testAPI, vid string, users int) {
	tokens := make([]string, max(users, 1))
	for i := range tokens {
		tokens[i] = api.userToken(int64(i + 1))
	}
	benchOrdersTokens(b, api, vid, tokens)
}

// benchOrdersTokens is benchOrdersOn with the buyers' tokens given.
func benchOrdersTokens(b *testing.B, api *testAPI, vid string, tokens []string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency, MaxConnsPerHost: benchConcurrency}}
	healthz := func(int) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, api.url+"/healthz", nil)
	}
	order := func(i int) (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, api.url+"/api/vouchers/"+vid+"/orders", nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+tokens[i%len(tokens)])
		}
		return req, err
	}
	var hzTime, orderTime, hzCPU, orderCPU, orderRedis time.Duration
	b.ResetTimer()
	for r := range benchRounds {
		from, to := r*b.N/benchRounds, (r+1)*b.N/benchRounds
		b.StopTimer()
		cpu0, start := processCPU(b), time.Now()
		hammerHTTP(b, client, from, to, healthz)
		cpu1, redis1, mid := processCPU(b), redisCPU(b, api.redis), time.Now()
		b.StartTimer()
		hammerHTTP(b, client, from, to, order)
		b.StopTimer()
		cpu2, redis2 := processCPU(b), redisCPU(b, api.redis)
		hzTime, orderTime = hzTime+mid.Sub(start), orderTime+time.Since(mid)
		hzCPU, orderCPU, orderRedis = hzCPU+cpu1-cpu0, orderCPU+cpu2-cpu1, orderRedis+redis2-redis1
	}
	n := float64(b.N)
	b.ReportMetric(float64(hzCPU.Microseconds())/n, "cpu-µs/healthz")
	b.ReportMetric(float64(orderCPU.Microseconds())/n, "cpu-µs/attempt")
	b.ReportMetric(float64(orderRedis.Microseconds())/n, "redis-µs/attempt")
	b.ReportMetric(n/orderTime.Seconds(), "attempts/s")
	b.ReportMetric(n/hzTime.Seconds(), "healthz/s")
	b.ReportMetric(hzTime.Seconds()/orderTime.Seconds(), "ratio")
}

// benchRounds is how many times benchOrders alternates its two loads.
const benchRounds = 5

// processCPU returns the CPU time (user and system) this process used so
// far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns the CPU time (user and system) the Redis server used so
// far, by its INFO cpu.
func redisCPU(b *testing.B, rc rueidis.Client) time.Duration {
	info, err := rc.Do(context.Background(), rc.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for line := range strings.Lines(info) {
		name, val, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			f, err := strconv.ParseFloat(val, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %q: %v", line, err)
			}
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// benchConcurrency is how many requests the benchmark keeps in flight.
const benchConcurrency = 64

// hammerHTTP sends the requests from to to (exclusive), benchConcurrency at
// a time, and fails the benchmark on transport errors and 5xx answers.
func hammerHTTP(b *testing.B, client *http.Client, from, to int, newReq func(i int) (*http.Request, error)) {
	var (
		next     atomic.Int64
		failures atomic.Int64
		wg       sync.WaitGroup
		firstErr sync.Once
	)
	next.Store(int64(from))
	for range benchConcurrency {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < to; i = int(next.Add(1)) - 1 {
				req, err := newReq(i)
				if err != nil {
					b.Error(err)
					return
				}
				res, err := client.Do(req)
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					if res.StatusCode >= 500 {
						err = fmt.Errorf("%s %s: %s", req.Method, req.URL.Path, res.Status)
					}
				}
				if err != nil {
					failures.Add(1)
					firstErr.Do(func() { b.Error(err) })
				}
			}
		})
	}
	wg.Wait()
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d of %d requests failed", f, to-from)
	}
}

// BenchmarkRefusalHandler calls the handler directly, without HTTP: GET
// /healthz, and an order attempt on a voucher this instance knows is sold
// out (async), so what separates the two is the handler's own work — the
// token, the route, the refusal and its JSON error.
func BenchmarkRefusalHandler(b *testing.B) {
	api := newTestAPI(b, apiOptions{strategy: "async"})
	vid := api.createVoucher(1)
	tok := "Bearer " + api.userToken(1)
	other := "Bearer " + api.userToken(2)
	serve := func(method, path, auth string) int {
		req := httptest.NewRequest(method, path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		api.h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := serve("POST", "/api/vouchers/"+vid+"/orders", tok); code != http.StatusOK {
		b.Fatalf("the one order: %d", code)
	}
	if code := serve("POST", "/api/vouchers/"+vid+"/orders", other); code != http.StatusConflict {
		b.Fatalf("after the sell-out: %d, want 409", code)
	}
	b.Run("healthz", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			serve("GET", "/healthz", "")
		}
	})
	b.Run("sold-out", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if serve("POST", "/api/vouchers/"+vid+"/orders", other) != http.StatusConflict {
				b.Fatal("not refused")
			}
		}
	})
}
