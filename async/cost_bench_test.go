package async_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/store"
)

// redisCost is a private redis-server's CPU (INFO cpu: used_cpu_sys +
// used_cpu_user of the server process) and its commandstats, read at one
// moment: the difference of two readings is what Redis spent between
// them, whatever the machine's other load.
type redisCost struct {
	cpu   time.Duration
	calls map[string]int64
	usec  map[string]int64
}

// readRedisCost reads a redisCost of the server c is connected to.
func readRedisCost(tb testing.TB, c rueidis.Client) redisCost {
	tb.Helper()
	text, err := c.Do(context.Background(), c.B().Info().Section("cpu").Section("commandstats").Build()).ToString()
	if err != nil {
		tb.Fatal(err)
	}
	r := redisCost{calls: map[string]int64{}, usec: map[string]int64{}}
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			r.cpu += time.Duration(f * float64(time.Second))
		case strings.HasPrefix(k, "cmdstat_"):
			name := strings.TrimPrefix(k, "cmdstat_")
			for field := range strings.SplitSeq(v, ",") {
				f, n, _ := strings.Cut(field, "=")
				x, _ := strconv.ParseInt(n, 10, 64)
				switch f {
				case "calls":
					r.calls[name] += x
				case "usec":
					r.usec[name] += x
				}
			}
		}
	}
	return r
}

// since returns what the server spent from before to r.
func (r redisCost) since(before redisCost) redisCost {
	d := redisCost{cpu: r.cpu - before.cpu, calls: map[string]int64{}, usec: map[string]int64{}}
	for k, n := range r.calls {
		if n -= before.calls[k]; n > 0 {
			d.calls[k], d.usec[k] = n, r.usec[k]-before.usec[k]
		}
	}
	return d
}

// breakdown formats the commands by time spent, per unit of n: calls and
// µs of command time (a script's time includes the commands it ran, which
// are listed too).
func (r redisCost) breakdown(n int) string {
	names := make([]string, 0, len(r.usec))
	for k := range r.usec {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return r.usec[names[i]] > r.usec[names[j]] })
	var b strings.Builder
	for _, k := range names {
		fmt.Fprintf(&b, "  %-22s %8.3f calls %7.2f µs\n", k, float64(r.calls[k])/float64(n), float64(r.usec[k])/float64(n))
	}
	return b.String()
}

// placeOrders places n orders of the voucher, each for a new user, from
// the given number of goroutines; every one must be accepted.
func placeOrders(b *testing.B, e *env, voucherID int64, n, clients int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				u := next.Add(1)
				if u > int64(n) {
					return
				}
				if _, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: 1_000_000 + u}); err != nil {
					b.Errorf("PlaceOrder: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkRedisCostPerOrder measures Redis's CPU per accepted order, all
// in: b.N orders of one hot voucher placed from 32 or 256 goroutines (the
// more orders wait, the larger the gate's batches) while a consumer
// persists them to MySQL, until the backlog is drained. It counts
// everything the private redis-server did meanwhile (the gate, ids,
// pointers, the consumer's reads, acks and trims, heartbeats and the
// background checks), reports the orders per gate call, and logs the
// commandstats breakdown per order.
//
//	go test -run '^$' -bench RedisCostPerOrder -benchtime 30000x ./async/
func BenchmarkRedisCostPerOrder(b *testing.B) {
	for _, clients := range []int{32, 256} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { redisCostPerOrder(b, clients) })
	}
}

func redisCostPerOrder(b *testing.B, clients int) {
	e, _ := privateEnv(b)
	v := e.Voucher(b.N)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	before := readRedisCost(b, e.Client)
	b.ResetTimer()
	placeOrders(b, e, v.ID, b.N, clients)
	e.WaitDrained(v.ID, b.N)
	b.StopTimer()
	d := readRedisCost(b, e.Client).since(before)
	b.ReportMetric(float64(d.cpu.Microseconds())/float64(b.N), "redis-µs/order")
	// gate.lua appends a batch's orders with one XADD; nothing else in
	// this run does (dead.lua only for an order that fails).
	if calls := d.calls["xadd"]; calls > 0 {
		b.ReportMetric(float64(b.N)/float64(calls), "orders/gate-call")
	}
	var cmd int64
	for _, u := range d.usec {
		cmd += u
	}
	b.ReportMetric(float64(cmd)/float64(b.N), "cmd-µs/order")
	b.Logf("%d orders, Redis CPU %v; per order:\n%s", b.N, d.cpu, d.breakdown(b.N))
}

// BenchmarkIdleBacklog measures what a backlog costs Redis when nothing
// happens: a voucher with 100,000 accepted orders and no consumer (the
// outage case), the metrics sampler every 2 s and the epoch check every
// second running, for 10 s. It reports Redis's CPU as a share of one core.
//
//	go test -run '^$' -bench IdleBacklog -benchtime 1x ./async/
func BenchmarkIdleBacklog(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", n), func(b *testing.B) {
			e, _ := privateEnv(b)
			v := e.Voucher(n)
			placeOrders(b, e, v.ID, n, 32)
			db, ok := e.DB.(*store.DB)
			if !ok {
				b.Fatalf("the env's store is a %T", e.DB)
			}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			s := metrics.NewSampler(metrics.SamplerConfig{DB: db, Redis: e.Client, Prefix: e.Prefix, Logger: e.Log})
			wg.Go(func() { s.Run(ctx) })
			wg.Go(func() { e.Svc.WatchEpoch(ctx, time.Second) })
			const window = 10 * time.Second
			b.ResetTimer()
			for range b.N {
				before := readRedisCost(b, e.Client)
				time.Sleep(window)
				d := readRedisCost(b, e.Client).since(before)
				b.ReportMetric(100*d.cpu.Seconds()/window.Seconds(), "redis-%core")
				b.Logf("backlog %d, idle %v: Redis CPU %v; per second:\n%s", n, window, d.cpu, d.breakdown(int(window.Seconds())))
			}
			b.StopTimer()
			cancel()
			wg.Wait()
			if got, err := e.Svc.Backlog(context.Background()); err != nil || got != int64(n) {
				b.Errorf("backlog %d, %v; want %d", got, err, n)
			}
		})
	}
}
