package async_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lifecycle"
)

// BenchmarkShardSpread runs one hot voucher of K shards on a private
// cluster of K masters without replicas (K = 3 and 6), with a payment
// window and the consumer running, and reports each master's share of the
// Redis command time (the usec of every command in INFO commandstats,
// summed; delta over the phase) in two phases:
//
//   - sale: b.N buyers, 32 at a time, each a new order (every attempt
//     accepted: the stock is twice b.N), until MySQL holds every order;
//   - returns: every order made due at once and expired by one expirer
//     (MySQL, then each unit back in its shard: lifecycle and
//     async/returns) while 16 buyers keep ordering (new users, the
//     returned units sold again); it reports returns/s and the buyers'
//     attempts/s meanwhile.
//
// "%time-<phase>-max" is the busiest master's share; the target is
// 100/K + 5. "%cpu-<phase>-max" is the same of Redis's CPU (INFO cpu),
// which a server descheduled mid-command does not inflate as it does the
// command time (on a machine with fewer cores than masters).
//
//	go test -run '^$' -bench ShardSpread -benchtime 20000x -timeout 30m ./async/
func BenchmarkShardSpread(b *testing.B) {
	for _, k := range []int{3, 6} {
		c := testenv.StartCluster(b, testenv.WithoutReplicas(), testenv.WithMasters(k))
		b.Run(fmt.Sprintf("masters=%d/shards=%d", k, k), func(b *testing.B) {
			e := envOnCluster(b, c)
			stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
			defer stop()
			v := e.windowVoucher(min(2*b.N+64, flashsale.MaxStock), 10*time.Minute, 1, k)
			masters := c.Masters()
			before := commandTimes(b, masters)
			b.ResetTimer()
			orders := placeAll(b, e, v.ID, 1, b.N, 32)
			e.WaitDrained(v.ID, b.N)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "orders/s")
			reportShares(b, "sale", before, commandTimes(b, masters))

			before = commandTimes(b, masters)
			elapsed, attempts := expireAll(b, e, v.ID, len(orders))
			reportShares(b, "returns", before, commandTimes(b, masters))
			b.ReportMetric(float64(len(orders))/elapsed.Seconds(), "returns/s")
			b.ReportMetric(float64(attempts)/elapsed.Seconds(), "attempts/s-during-returns")
		})
	}
}

// commandTimes returns each master's command time per command, µs, and
// under cpuKey the CPU it used (user + system, µs).
func commandTimes(b *testing.B, masters []*testenv.RedisServer) []map[string]float64 {
	out := make([]map[string]float64, len(masters))
	for i, m := range masters {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		client := m.Client(b)
		text, err := client.Do(ctx, client.B().Info().Section("commandstats").Section("cpu").Build()).ToString()
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		out[i] = map[string]float64{}
		for line := range strings.SplitSeq(text, "\n") {
			cmd, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
			if cmd == "used_cpu_user" || cmd == "used_cpu_sys" {
				n, _ := strconv.ParseFloat(stats, 64)
				out[i][cpuKey] += n * 1e6
			}
			if !ok || !strings.HasPrefix(cmd, "cmdstat_") {
				continue
			}
			for f := range strings.SplitSeq(stats, ",") {
				if name, val, _ := strings.Cut(f, "="); name == "usec" {
					n, _ := strconv.ParseFloat(val, 64)
					out[i][strings.TrimPrefix(cmd, "cmdstat_")] = n
				}
			}
		}
	}
	return out
}

// cpuKey holds a master's CPU among its commands' times.
const cpuKey = "~cpu"

// reportShares reports each master's share of the command time between
// two readings, and the busiest one's, and logs each master's five
// costliest commands.
func reportShares(b *testing.B, phase string, before, after []map[string]float64) {
	logf := b.Logf
	if b.N == 1 { // the run that sizes b.N: its lines would crowd out the real run's
		logf = func(string, ...any) {}
	}
	var total, busiest, cpuTotal, cpuBusiest float64
	spent := make([]float64, len(after))
	var tops []string
	for i := range after {
		cpuTotal += after[i][cpuKey] - before[i][cpuKey]
		var top []string
		for cmd, us := range after[i] {
			if cmd == cpuKey {
				continue
			}
			d := us - before[i][cmd]
			spent[i] += d
			top = append(top, fmt.Sprintf("%s %.1f ms", cmd, d/1000))
		}
		slices.SortFunc(top, func(x, y string) int { return cmp.Compare(msOf(y), msOf(x)) })
		tops = append(tops, fmt.Sprintf("m%d: %s", i, strings.Join(top[:min(5, len(top))], ", ")))
		total += spent[i]
	}
	var shares []string
	for i := range after {
		share := 100 * spent[i] / max(total, 1)
		busiest = max(busiest, share)
		shares = append(shares, fmt.Sprintf("%.1f%%", share))
		b.ReportMetric(share, fmt.Sprintf("%%time-%s-m%d", phase, i))
	}
	b.ReportMetric(busiest, "%time-"+phase+"-max")
	for i := range after { // CPU is not inflated by a server descheduled mid-command, as command time is
		cpuBusiest = max(cpuBusiest, 100*(after[i][cpuKey]-before[i][cpuKey])/max(cpuTotal, 1))
	}
	b.ReportMetric(cpuBusiest, "%cpu-"+phase+"-max")
	logf("%s: command time per master %s (%.0f ms in all); the costliest commands: %s", phase, strings.Join(shares, " · "), total/1000, strings.Join(tops, "; "))
}

// placeAll places one order for each of n users from first, concurrency
// at a time, and returns them; any refusal fails the benchmark.
func placeAll(b testing.TB, e *env, voucherID, first int64, n, concurrency int) []*flashsale.Order {
	orders := make([]*flashsale.Order, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				o, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: first + i})
				if err != nil {
					b.Errorf("PlaceOrder(user %d): %v", first+i, err)
					return
				}
				orders[i] = o
			}
		})
	}
	wg.Wait()
	return orders
}

// expireAll makes every order of the voucher due now and runs an
// expirer (as an instance does) until each is expired and its unit back,
// while 16 buyers (new users each attempt) keep ordering the voucher; it
// returns how long that took and the buyers' attempts.
func expireAll(b testing.TB, e *env, voucherID int64, n int) (time.Duration, int64) {
	due := time.Now()
	if _, err := e.SQL.Exec("UPDATE orders SET pay_by = ? WHERE voucher_id = ?", due.UTC().Format("2006-01-02 15:04:05.000000"), voucherID); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	life := lifecycle.New(e.DB, lifecycle.Config{Restocker: async.Returns(e.Client, e.Config()), Logger: e.Log})
	go func() { _ = life.Run(ctx, lifecycle.ExpirerConfig{}) }()
	var attempts, user atomic.Int64
	user.Store(1 << 40)
	var buyers sync.WaitGroup
	for range 16 {
		buyers.Go(func() {
			for ctx.Err() == nil {
				_, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: voucherID, UserID: user.Add(1)})
				if code := asynctest.Code(err); err != nil && code != flashsale.ESoldOut && code != flashsale.EBusy && ctx.Err() == nil {
					b.Errorf("PlaceOrder during returns: %v", err)
					return
				}
				attempts.Add(1)
			}
		})
	}
	e.WaitFor("every order expired and returned", 10*time.Minute, func() (bool, error) {
		a, err := e.DB.AuditVoucher(context.Background(), voucherID)
		return a.Expired == n && a.ReturnsPending == 0, err
	})
	elapsed := time.Since(due)
	cancel()
	buyers.Wait()
	return elapsed, attempts.Load()
}

// msOf reads the figure back from "<command> <ms> ms".
func msOf(s string) float64 {
	f := strings.Fields(s)
	n, _ := strconv.ParseFloat(f[len(f)-2], 64)
	return n
}
