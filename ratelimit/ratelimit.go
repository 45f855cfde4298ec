// Package ratelimit limits request rates in Redis with GCRA, so every
// instance of the service shares one budget per user and per client IP —
// a defence against bots that send hundreds of requests a second for one
// order. A rule costs one short Lua script on one key; several rules go in
// one round trip.
package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"time"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/redis/rueidis"
)

//go:embed gcra.lua
var gcraSource string

// gcra's ExecMulti sends every rule in one round trip (luascript).
var gcra = luascript.New(gcraSource)

// maxInterval bounds the emission interval, in µs: one request a year.
const maxInterval = 365 * 24 * 3600 * 1e6

// Rule is one budget: Rate requests per second on Key, with bursts of up to
// Burst requests. A Rate of 0 or less disables the rule; rates below one
// request a year count as one a year.
type Rule struct {
	Key   string
	Rate  float64
	Burst int
}

// Limiter checks rules against Redis.
type Limiter struct {
	c      rueidis.Client
	prefix string
}

// New returns a Limiter that keeps its state under keys prefix+"{"+key+"}".
func New(c rueidis.Client, prefix string) *Limiter {
	return &Limiter{c: c, prefix: prefix}
}

// Allow spends one request from every enabled rule. It returns 0 when all
// allow it, or how long to wait before the strictest refusing rule allows
// one again. A rule that allows spends its budget even if another refuses.
func (l *Limiter) Allow(ctx context.Context, rules ...Rule) (time.Duration, error) {
	execs := make([]rueidis.LuaExec, 0, len(rules))
	for _, r := range rules {
		if math.IsNaN(r.Rate) {
			return 0, fmt.Errorf("ratelimit: rule %q: the rate is NaN", r.Key)
		}
		if r.Rate <= 0 {
			continue
		}
		interval := min(max(1, math.Round(1e6/r.Rate)), maxInterval)
		execs = append(execs, rueidis.LuaExec{
			Keys: []string{l.prefix + "{" + r.Key + "}"},
			Args: []string{fmt.Sprintf("%.0f", interval), fmt.Sprint(max(r.Burst, 1))},
		})
	}
	if len(execs) == 0 {
		return 0, nil
	}
	var wait time.Duration
	for _, res := range gcra.ExecMulti(ctx, l.c, execs...) {
		v, err := res.AsIntSlice()
		if err != nil {
			return 0, fmt.Errorf("ratelimit: %w", err)
		}
		if v[0] == 0 {
			// Clamped: a wait of ~292 years or more would overflow.
			wait = max(wait, time.Duration(min(v[1], math.MaxInt64/1000))*time.Microsecond)
		}
	}
	return wait, nil
}
