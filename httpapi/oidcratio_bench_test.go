package httpapi_test

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/auth"
)

var providerRounds = flag.Int("provider-rounds", 10, "BenchmarkProviderRatio: rounds of one HS256 phase and one provider phase")

// BenchmarkProviderRatio is BenchmarkProviderSale's comparison made in
// pairs: on one server, -provider-rounds rounds of two phases of b.N
// attempts each, the sale shape (stock for half the buyers, each buyer
// clicking five times) once with HS256 tokens and once with the
// provider's, which goes first alternating. Every phase sells a voucher of
// its own to buyers of its own. A lone run of either sale swings ±30 %
// with this machine's load; a round's two phases see the same load, so
// the median of the rounds' ratios is the figure to read:
//   - ratio-median: provider attempts/s ÷ HS256 attempts/s;
//   - cpu-ratio-median: HS256 ÷ provider CPU per attempt, this process's;
//   - machine-ratio-median: the same with the machine's CPU (/proc/stat),
//     which counts MySQL and Redis too.
//
// "verify-µs" is what parsing and checking one of the tokens costs alone
// (golang-jwt and the Go crypto, this process's CPU), and
// "cpu-ratio-bound" the CPU ratio a sale would reach whose provider
// tokens cost that once per buyer and nothing else.
//
// RS256 buyers are new to flashsale (their first click numbers them in
// MySQL); RS256/known's were numbered before the phase, as the buyers of
// an earlier sale or of the waiting room are.
func BenchmarkProviderRatio(b *testing.B) {
	rs, es, ed, p, provider := benchProvider(b)
	for _, c := range []struct {
		name  string
		key   *auth.SigningKey
		known bool
	}{
		{"RS256", rs, false},
		{"RS256/known", rs, true},
		{"ES256", es, false},
		{"EdDSA", ed, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			api := newTestAPI(b, apiOptions{strategy: "async", provider: provider})
			warmUp(b, api)
			users := max(b.N/5, 1)
			hs, idp := make([][]string, *providerRounds), make([][]string, *providerRounds)
			for r := range *providerRounds {
				hs[r], idp[r] = make([]string, users), make([]string, users)
				for i := range users {
					hs[r][i] = api.userToken(int64(r*users + i + 1))
					sub := fmt.Sprintf("r%d-buyer-%d", r, i)
					tok, err := c.key.Sign(jwt.MapClaims{"iss": p.URL, "aud": "flashsale-shop", "sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
					if err != nil {
						b.Fatal(err)
					}
					idp[r][i] = tok
					if c.known {
						if _, err := api.auth.Buyer(b.Context(), p.URL, sub); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			verify := verifyCost(b, c.key, idp[0])
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency, MaxConnsPerHost: benchConcurrency}}
			var ratio, cpuRatio, machineRatio []float64
			var hsTotal, idpTotal phaseCost
			b.ResetTimer()
			for r := range *providerRounds {
				var h, o phaseCost
				if r%2 == 0 {
					h = salePhase(b, api, client, hs[r])
					o = salePhase(b, api, client, idp[r])
				} else {
					o = salePhase(b, api, client, idp[r])
					h = salePhase(b, api, client, hs[r])
				}
				ratio = append(ratio, h.wall.Seconds()/o.wall.Seconds())
				cpuRatio = append(cpuRatio, h.cpu.Seconds()/o.cpu.Seconds())
				machineRatio = append(machineRatio, h.machine.Seconds()/o.machine.Seconds())
				hsTotal.add(h)
				idpTotal.add(o)
			}
			b.StopTimer()
			n := float64(b.N * *providerRounds)
			b.ReportMetric(median(ratio), "ratio-median")
			b.ReportMetric(median(cpuRatio), "cpu-ratio-median")
			b.ReportMetric(median(machineRatio), "machine-ratio-median")
			// What the CPU ratio could be if a provider's token cost
			// nothing but its one signature check per buyer.
			hsCPU := float64(hsTotal.cpu.Microseconds()) / n
			b.ReportMetric(verify, "verify-µs")
			b.ReportMetric(hsCPU/(hsCPU+verify/5), "cpu-ratio-bound")
			b.ReportMetric(n/hsTotal.wall.Seconds(), "hs256-attempts/s")
			b.ReportMetric(n/idpTotal.wall.Seconds(), "attempts/s")
			b.ReportMetric(float64(hsTotal.cpu.Microseconds())/n, "hs256-cpu-µs/attempt")
			b.ReportMetric(float64(idpTotal.cpu.Microseconds())/n, "cpu-µs/attempt")
			b.ReportMetric(float64(hsTotal.machine.Microseconds())/n, "hs256-machine-µs/attempt")
			b.ReportMetric(float64(idpTotal.machine.Microseconds())/n, "machine-µs/attempt")
		})
	}
}

// phaseCost is what one phase of BenchmarkProviderRatio took: wall time,
// this process's CPU and the machine's.
type phaseCost struct{ wall, cpu, machine time.Duration }

func (c *phaseCost) add(o phaseCost) {
	c.wall, c.cpu, c.machine = c.wall+o.wall, c.cpu+o.cpu, c.machine+o.machine
}

// salePhase sells a new voucher (stock for half the buyers) to the
// holders of tokens, each clicking five times, b.N attempts.
func salePhase(b *testing.B, api *testAPI, client *http.Client, tokens []string) phaseCost {
	b.StopTimer()
	vid := api.createVoucher(max(len(tokens)/2, 1))
	runtime.GC()
	cpu0, m0, start := processCPU(b), machineCPU(b), time.Now()
	b.StartTimer()
	hammerHTTP(b, client, 0, b.N, func(i int) (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, api.url+"/api/vouchers/"+vid+"/orders", nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+tokens[i%len(tokens)])
		}
		return req, err
	})
	b.StopTimer()
	return phaseCost{time.Since(start), processCPU(b) - cpu0, machineCPU(b) - m0}
}

// machineCPU returns the CPU time every core of the machine spent busy so
// far (not idle or waiting for I/O), by /proc/stat.
func machineCPU(b *testing.B) time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("/proc/stat: %q: %v", line, err)
		}
		if i != 3 && i != 4 && i < 8 { // not idle, iowait, steal, guests
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// verifyCost returns the CPU, in µs, of parsing and checking one of
// tokens (signed by k) with k's public key, by golang-jwt: a provider
// token's least cost, once per buyer.
func verifyCost(b *testing.B, k *auth.SigningKey, tokens []string) float64 {
	pub := k.Key.Public()
	p := jwt.NewParser(jwt.WithValidMethods([]string{k.Alg}))
	cpu0 := processCPU(b)
	for _, tok := range tokens {
		if _, err := p.Parse(tok, func(*jwt.Token) (any, error) { return pub, nil }); err != nil {
			b.Fatal(err)
		}
	}
	return float64((processCPU(b) - cpu0).Microseconds()) / float64(len(tokens))
}
