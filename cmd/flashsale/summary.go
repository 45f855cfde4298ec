package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/metrics"
)

// answerCounter counts what a server answered, by status class, for the
// line serve prints when it stops.
type answerCounter struct {
	ok, clientErr, serverErr, other atomic.Int64
}

// wrap counts h's answers.
func (c *answerCounter) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := metrics.NewStatusRecorder(w)
		h.ServeHTTP(sw, r)
		switch sw.Status / 100 {
		case 2:
			c.ok.Add(1)
		case 4:
			c.clientErr.Add(1)
		case 5:
			c.serverErr.Add(1)
		default:
			c.other.Add(1)
		}
	})
}

// String is "N requests answered (a 2xx, b 4xx, c 5xx)".
func (c *answerCounter) String() string {
	ok, ce, se, o := c.ok.Load(), c.clientErr.Load(), c.serverErr.Load(), c.other.Load()
	return fmt.Sprintf("%d requests answered (%d 2xx, %d 4xx, %d 5xx)", ok+ce+se+o, ok, ce, se)
}

// consumerSummary is what a stream consumer did, in one line.
func consumerSummary(c *consume.Consumer) string {
	s := c.Stats()
	return fmt.Sprintf("consumer %s: %d persisted, %d already present, %d dead-lettered, %d claimed",
		c.Name(), s.Persisted, s.AlreadyPresent, s.DeadLettered, s.Claimed)
}

// serveSummary is the line serve prints when it stops.
func serveSummary(inst *instance, cfg serveConfig, up time.Duration) string {
	line := fmt.Sprintf("flashsale: stopped serving %s (strategy %s) after %s: %s", inst.URL, cfg.strategy, up.Round(time.Second), &inst.answers)
	if inst.svc.consumer != nil && cfg.consume {
		line += "; " + consumerSummary(inst.svc.consumer)
	}
	return line
}

// warnUnsafe says at start, on stdout and in the log, that the strategy
// breaks an invariant by design: it is for the lab, not a sale.
func warnUnsafe(cfg serveConfig, log *slog.Logger, stdout io.Writer) {
	entry, _ := lookupStrategy(cfg.strategy) // validated
	if entry.unsafe == "" {
		return
	}
	msg := fmt.Sprintf("strategy %s is UNSAFE BY DESIGN: it %s; it is for the load lab, never for a real sale", cfg.strategy, entry.unsafe)
	fmt.Fprintln(stdout, "flashsale: WARNING:", msg)
	log.Warn(msg)
}

// warnNoAdminToken says at start that admin routes cannot be used: a
// warning on real servers, a note on embedded ones (trying things out).
func warnNoAdminToken(cfg serveConfig, log *slog.Logger) {
	if cfg.adminToken != (adminTokenFlags{}) {
		return
	}
	level := slog.LevelWarn
	if cfg.backends.Embedded() {
		level = slog.LevelInfo
	}
	log.Log(context.Background(), level, "no --admin-token: every admin route (POST /api/vouchers) will answer 401")
}
