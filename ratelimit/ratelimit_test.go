package ratelimit_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/ratelimit"
)

func TestAllowBurstThenRefuse(t *testing.T) {
	c, prefix := testenv.Redis(t)
	l := ratelimit.New(c, prefix)
	ctx := context.Background()
	rule := ratelimit.Rule{Key: "user:1", Rate: 10, Burst: 5}
	for i := range 5 {
		wait, err := l.Allow(ctx, rule)
		if err != nil || wait != 0 {
			t.Fatalf("request %d within the burst: wait %v, err %v", i, wait, err)
		}
	}
	wait, err := l.Allow(ctx, rule)
	if err != nil {
		t.Fatal(err)
	}
	if wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("request past the burst: wait %v, want in (0, 100ms]", wait)
	}
	time.Sleep(wait + 5*time.Millisecond)
	if wait, err := l.Allow(ctx, rule); err != nil || wait != 0 {
		t.Fatalf("after waiting the retry hint: wait %v, err %v", wait, err)
	}
}

func TestAllowRulesAreIndependentAndStrictestWins(t *testing.T) {
	c, prefix := testenv.Redis(t)
	l := ratelimit.New(c, prefix)
	ctx := context.Background()
	slow := ratelimit.Rule{Key: "ip:10.0.0.1", Rate: 1, Burst: 1}
	fast := ratelimit.Rule{Key: "user:7", Rate: 1000, Burst: 100}
	if wait, err := l.Allow(ctx, fast, slow); err != nil || wait != 0 {
		t.Fatalf("first request: wait %v, err %v", wait, err)
	}
	wait, err := l.Allow(ctx, fast, slow)
	if err != nil {
		t.Fatal(err)
	}
	if wait < 900*time.Millisecond {
		t.Fatalf("second request: wait %v, want about 1s from the 1/s rule", wait)
	}
	other := ratelimit.Rule{Key: "user:8", Rate: 1, Burst: 1}
	if wait, err := l.Allow(ctx, other); err != nil || wait != 0 {
		t.Fatalf("another key: wait %v, err %v", wait, err)
	}
}

func TestAllowDisabledRulesTouchNothing(t *testing.T) {
	c, prefix := testenv.Redis(t)
	l := ratelimit.New(c, prefix)
	for range 3 {
		if wait, err := l.Allow(context.Background(), ratelimit.Rule{Key: "user:1", Rate: 0}); err != nil || wait != 0 {
			t.Fatalf("disabled rule: wait %v, err %v", wait, err)
		}
	}
	n, err := c.Do(context.Background(), c.B().Exists().Key(prefix+"{user:1}").Build()).AsInt64()
	if err != nil || n != 0 {
		t.Fatalf("disabled rule wrote a key: exists=%d err=%v", n, err)
	}
}

func TestAllowSharedAcrossLimiters(t *testing.T) {
	c, prefix := testenv.Redis(t)
	a, b := ratelimit.New(c, prefix), ratelimit.New(c, prefix)
	rule := ratelimit.Rule{Key: "user:1", Rate: 1, Burst: 2}
	ctx := context.Background()
	for _, l := range []*ratelimit.Limiter{a, b} {
		if wait, err := l.Allow(ctx, rule); err != nil || wait != 0 {
			t.Fatalf("within the shared burst: wait %v, err %v", wait, err)
		}
	}
	if wait, err := a.Allow(ctx, rule); err != nil || wait == 0 {
		t.Fatalf("the third request across two instances must be refused: wait %v, err %v", wait, err)
	}
}

// TestAllowTinyRatesRefuse: a rate so small that its wait would overflow a
// time.Duration still refuses the request after the burst, with a long
// wait, instead of letting everything through.
func TestAllowTinyRatesRefuse(t *testing.T) {
	c, prefix := testenv.Redis(t)
	l := ratelimit.New(c, prefix)
	ctx := context.Background()
	for _, rate := range []float64{1e-10, 1e-300} {
		rule := ratelimit.Rule{Key: fmt.Sprint("tiny:", rate), Rate: rate, Burst: 1}
		if wait, err := l.Allow(ctx, rule); err != nil || wait != 0 {
			t.Fatalf("rate %g, first request: wait %v, err %v", rate, wait, err)
		}
		if wait, err := l.Allow(ctx, rule); err != nil || wait < 300*24*time.Hour {
			t.Fatalf("rate %g, second request: wait %v, err %v; want a refusal for about a year", rate, wait, err)
		}
	}
}

func TestAllowRejectsANaNRate(t *testing.T) {
	c, prefix := testenv.Redis(t)
	l := ratelimit.New(c, prefix)
	if _, err := l.Allow(context.Background(), ratelimit.Rule{Key: "nan", Rate: math.NaN(), Burst: 1}); err == nil {
		t.Fatal("Allow with a NaN rate succeeded")
	}
}

// TestAllowIsOneRoundTrip checks, on a private Redis, that Allow sends one
// EVALSHA per rule and no SCRIPT LOAD, and that it goes on after Redis
// forgets the script (SCRIPT FLUSH, as after a restart) with the budget it
// had spent.
func TestAllowIsOneRoundTrip(t *testing.T) {
	srv := testenv.StartRedis(t)
	c := srv.Client(t)
	l := ratelimit.New(c, "rl:")
	ctx := context.Background()
	rules := []ratelimit.Rule{{Key: "user:1", Rate: 1, Burst: 3}, {Key: "ip:1", Rate: 1, Burst: 3}}
	allow := func(want bool) {
		t.Helper()
		wait, err := l.Allow(ctx, rules...)
		if err != nil || (wait == 0) != want {
			t.Fatalf("Allow: wait %v, err %v; want allowed %v", wait, err, want)
		}
	}
	allow(true) // a fresh server: NOSCRIPT, then EVAL
	if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	allow(true)
	stats := testenv.CommandCalls(t, c)
	if stats["evalsha"] != 2 || stats["script"] != 0 || stats["eval"] != 0 {
		t.Fatalf("one Allow of two rules sent %v; want 2 EVALSHA, no SCRIPT LOAD or EVAL", stats)
	}
	if err := c.Do(ctx, c.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	allow(true)  // the burst's third request, through EVAL
	allow(false) // the burst is spent
}

// BenchmarkAllow spends one request from a user rule and an IP rule, as
// the order route does, from 64 goroutines.
func BenchmarkAllow(b *testing.B) {
	c, prefix := testenv.Redis(b)
	l := ratelimit.New(c, prefix)
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		user := "user:" + strconv.FormatInt(next.Add(1), 10)
		rules := []ratelimit.Rule{{Key: user, Rate: 1e6, Burst: 1e6}, {Key: "ip:" + user, Rate: 1e6, Burst: 1e6}}
		for pb.Next() {
			if _, err := l.Allow(ctx, rules...); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "allows/s")
}
