package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/store"
)

// BenchmarkOverloadedRedis offers a real `serve --strategy async` far
// more new buyers' orders than its Redis can decide: the redis-server is
// held to a quarter or a tenth of a core (testenv.LimitCPU), and 512
// clients post
// orders without pause for 10 s (each of b.N times: run it with
// -benchtime 1x). It reports the server's own
// latency of the order route from its histogram
// (flashsale_http_request_duration_seconds: the share answered within
// 100 ms and the interpolated p50/p99, as histogram_quantile computes
// them), the shares accepted and answered 503 busy, and, once the
// consumer drained the backlog, that MySQL holds every order accepted.
//
//	go test -run '^$' -bench OverloadedRedis -benchtime 1x ./cmd/flashsale/
func BenchmarkOverloadedRedis(b *testing.B) {
	for _, share := range []float64{0.25, 0.1} {
		b.Run(fmt.Sprintf("redis-cpu=%v", share), func(b *testing.B) { overloadedRedis(b, share) })
	}
}

func overloadedRedis(b *testing.B, share float64) {
	const clients, offered = 512, 10 * time.Second
	rs := testenv.StartRedis(b)
	rc := rs.Client(b)
	info, err := rc.Do(context.Background(), rc.B().Info().Section("server").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	testenv.LimitCPU(b, infoInt(b, info, "process_id"), share)
	dbURL := testenv.MySQLURL(b)
	url, _ := startServe(b, "--strategy", "async", "--redis", rs.URL(), "--db", dbURL, "--public-metrics",
		"--rate-limit-user", "0", "--rate-limit-ip", "0") // one client IP, new buyers: no limit would bite but the gate's
	var v struct {
		ID string `json:"id"`
	}
	if code := call(b, http.MethodPost, url+"/api/vouchers", serveAdmin, voucherBody(100_000_000), &v); code != http.StatusCreated {
		b.Fatalf("create voucher: %d", code)
	}
	b.ResetTimer()
	probe := probeHealthz(url + "/healthz")
	codes := map[int]int{}
	for range b.N {
		for code, n := range offerOrders(b, url+"/api/vouchers/"+v.ID+"/orders", clients, offered) {
			codes[code] += n
		}
	}
	b.StopTimer()
	probe()
	total, accepted := 0, codes[http.StatusOK]+codes[http.StatusAccepted]+codes[http.StatusCreated]
	for _, n := range codes {
		total += n
	}
	within, p50, p99 := orderLatency(b, url)
	b.ReportMetric(within, "share≤100ms")
	b.ReportMetric(p50*1000, "p50-ms")
	b.ReportMetric(p99*1000, "p99-ms")
	// What any request suffers on this machine meanwhile: the floor.
	_, _, hz99 := routeLatency(b, url, "GET /healthz")
	b.ReportMetric(hz99*1000, "healthz-p99-ms")
	b.ReportMetric(float64(accepted)/float64(total), "accepted-share")
	b.ReportMetric(float64(codes[http.StatusServiceUnavailable])/float64(total), "busy-share")
	b.Logf("%d attempts in %v: %v", total, time.Duration(b.N)*offered, codes)
	if other := total - accepted - codes[http.StatusServiceUnavailable]; other > 0 {
		b.Errorf("%d answers neither accepted nor 503 busy: %v", other, codes)
	}
	waitPersisted(b, dbURL, v.ID, accepted)
}

// offerOrders has clients goroutines post orders of new buyers to url
// without pause for d, and counts the answers by status.
func offerOrders(b *testing.B, url string, clients int, d time.Duration) map[int]int {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}, Timeout: time.Minute}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	codes := map[int]int{}
	a, err := auth.New(serveSecret, serveAdmin)
	if err != nil {
		b.Fatal(err)
	}
	tokens := make(chan string, clients)
	go func() { // tokens are signed ahead, off the clients' path
		for u := int64(1); ; u++ {
			tok, err := a.UserToken(1_000_000+u, time.Hour)
			if err != nil {
				panic(err)
			}
			select {
			case tokens <- tok:
			case <-time.After(d + time.Minute):
				return
			}
		}
	}()
	end := time.Now().Add(d)
	for range clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				req, _ := http.NewRequest(http.MethodPost, url, nil)
				req.Header.Set("Authorization", "Bearer "+<-tokens)
				res, err := hc.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				mu.Lock()
				codes[res.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return codes
}

// probeHealthz sends GET /healthz every 10 ms until the returned function
// is called, so the server's histogram shows what a request that does
// nothing suffers on this machine under the same load.
func probeHealthz(url string) (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if res, err := http.Get(url); err == nil {
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// orderLatency reads the serve's histogram of the order route from
// /metrics: the share of answers within 100 ms, and the p50 and p99 in
// seconds, interpolated linearly within their bucket.
func orderLatency(b *testing.B, url string) (within, p50, p99 float64) {
	return routeLatency(b, url, metrics.OrderRoute)
}

// routeLatency is orderLatency for the route (the mux pattern).
func routeLatency(b *testing.B, url, route string) (within, p50, p99 float64) {
	res, err := http.Get(url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	var les, counts []float64
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "flashsale_http_request_duration_seconds_bucket{") || !strings.Contains(line, `route="`+route+`"`) {
			continue
		}
		_, rest, _ := strings.Cut(line, `le="`)
		le, rest, _ := strings.Cut(rest, `"`)
		n, err := strconv.ParseFloat(strings.TrimSpace(rest[strings.LastIndexByte(rest, ' '):]), 64)
		if err != nil {
			b.Fatalf("%q: %v", line, err)
		}
		bound := math.Inf(1)
		if le != "+Inf" {
			bound, _ = strconv.ParseFloat(le, 64)
		}
		les, counts = append(les, bound), append(counts, n)
	}
	if len(counts) == 0 || counts[len(counts)-1] == 0 {
		b.Fatalf("no histogram of %s in /metrics", route)
	}
	total := counts[len(counts)-1]
	for i, le := range les {
		if le == 0.1 {
			within = counts[i] / total
		}
	}
	return within, quantile(0.5, les, counts), quantile(0.99, les, counts)
}

// quantile is Prometheus's histogram_quantile over cumulative buckets.
func quantile(q float64, les, counts []float64) float64 {
	rank := q * counts[len(counts)-1]
	lower, below := 0.0, 0.0
	for i, le := range les {
		if counts[i] >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			return lower + (le-lower)*(rank-below)/(counts[i]-below)
		}
		lower, below = le, counts[i]
	}
	return lower
}

// waitPersisted waits until MySQL holds n orders of the voucher, and fails
// the benchmark when the consumer does not get there within two minutes.
func waitPersisted(b *testing.B, dbURL, voucherID string, n int) {
	ctx := context.Background()
	db, err := store.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	id, err := strconv.ParseInt(voucherID, 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	var a flashsale.Audit
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if a, err = db.AuditVoucher(ctx, id); err != nil {
			b.Fatal(err)
		}
		if a.Orders >= n {
			break
		}
	}
	if a.Orders != n || a.DuplicateBuyers != 0 {
		b.Fatalf("MySQL holds %d orders (%d buyers with more than one) of the %d accepted", a.Orders, a.DuplicateBuyers, n)
	}
}

// infoInt returns an integer field of an INFO reply.
func infoInt(b *testing.B, info, field string) int {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == field {
			n, err := strconv.Atoi(v)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("INFO has no %s", field)
	return 0
}
