package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/internal/statusline"
	"github.com/flashsale/flashsale/lab"
)

// demoCommand is a small bench of every strategy on embedded backends:
// the classic flash-sale stress test in well under a minute, with nothing to
// install.
func demoCommand(stdout, stderr io.Writer) *ffcli.Command {
	var (
		cfg       benchConfig
		redis, db refusedFlag
		lifecycle bool
	)
	fs := flag.NewFlagSet("flashsale demo", flag.ContinueOnError)
	fs.IntVar(&cfg.instances, "instances", 3, "service instances per strategy (in this process)")
	fs.IntVar(&cfg.stock, "stock", 50, "stock of each run's voucher")
	fs.IntVar(&cfg.users, "users", 300, "buyers")
	fs.IntVar(&cfg.requests, "requests", 0, "order attempts per run (default 3×users)")
	fs.IntVar(&cfg.concurrency, "concurrency", 100, "requests in flight")
	fs.DurationVar(&cfg.raceWindow, "race-window", 2*time.Millisecond, "sleep between reading and writing stock, to make races visible")
	fs.Uint64Var(&cfg.seed, "seed", 1, "shuffles the order of the clicks")
	cfg.registerOutput(fs)
	fs.BoolVar(&lifecycle, "lifecycle", true, fmt.Sprintf("then, for the safe strategies at once, a short sale with a %s payment window: some buyers cancel or never pay, and their units are resold until every unit is paid (or the sale ends: 20s, or %d times the longest sale before on a slower machine)", demoWindow, saleScale))
	fs.Var(&redis, "redis", "refused: the demo runs on embedded backends only (bench runs on real servers)")
	fs.Var(&db, "db", "refused: the demo runs on embedded backends only (bench runs on real servers)")
	return &ffcli.Command{
		Name:       "demo",
		ShortUsage: "flashsale demo [flags]",
		ShortHelp:  "a small sale per strategy on embedded backends, audited",
		LongHelp: fmt.Sprintf("Runs a small flash sale for each of the %d strategies (%s) on 3 in-process instances with a 2ms race "+
			"window, on an embedded Redis (miniredis) and SQLite: no servers needed, and no environment variables "+
			"read. Its progress is one line redrawn on stderr when that is a terminal, and nothing otherwise. "+
			"For MySQL and Redis use flashsale bench --redis URL --db URL.", len(strategies()), strings.Join(strategies(), ", ")),
		FlagSet: fs,
		Exec: noArgs(func(ctx context.Context) error {
			if redis.value != "" || db.value != "" {
				return usage(errors.New("demo runs on embedded backends only; for real servers run: " + realBenchCommand(cfg)))
			}
			cfg.strategies = strings.Join(strategies(), ",")
			cfg.doubles = 0.25
			cfg.timeout, cfg.drain, cfg.startup = 30*time.Second, time.Minute, 30*time.Second
			cfg.lockWait = time.Second
			cfg.locks = lockFlags{kinds: realLock, lease: 10 * time.Second, pauseEvery: 20}
			cfg.rules = benchRules{quantityMax: 1, limit: 1, saleFor: time.Minute}
			cfg.line = statusline.New(stderr) // one line on a terminal, nothing off one
			if lifecycle {
				cfg.then = demoLifecycle(cfg)
				if err := cfg.then.validate(); err != nil {
					return usage(err)
				}
			}
			if err := cfg.validate(); err != nil {
				return usage(err)
			}
			return demo(ctx, cfg, stdout, stderr)
		}),
	}
}

// demo runs the bench and says what its table shows.
func demo(ctx context.Context, cfg benchConfig, stdout, stderr io.Writer) error {
	start := time.Now()
	say(stdout, "flashsale demo: embedded backends only (miniredis and SQLite in this process; --redis/--db are not used)")
	rep, err := runBench(ctx, cfg, stdout, stderr)
	for _, r := range rep.Runs {
		if r.Strategy == "mutex" && r.Instances > 1 && !r.Exact() {
			say(stdout, fmt.Sprintf("mutex locks within one instance only: with %d instances, %d buyers still race each other (try --instances 1).", r.Instances, r.Instances))
		}
	}
	fmt.Fprintln(stdout)
	say(stdout, fmt.Sprintf("The demo took %s. The same against MySQL and Redis, with each instance a process of its own, on Redis DB %s under the prefix %s "+
		"and the MySQL database %s (create it first; if any is taken, change --redis, --redis-prefix or --db):",
		time.Since(start).Round(100*time.Millisecond), labRedisDB, labPrefix, labDB))
	fmt.Fprintf(stdout, "  flashsale bench --strategy %s \\\n    %s \\\n    %s \\\n    %s\n", strings.Join(strategies(), ","), realBenchLoad(cfg), realBenchRedis, realBenchDB)
	if l := cfg.then; l != nil {
		say(stdout, "and with a payment window:")
		fmt.Fprintf(stdout, "  flashsale bench --strategy %s \\\n    --instances %d --stock %d --users %d --payment-window %s --pay-ratio %g --cancel-ratio %g \\\n    %s \\\n    %s\n",
			l.strategies, max(l.instances, 3), l.stock, l.users, l.rules.window, l.rules.pay, l.rules.cancel, realBenchRedis, realBenchDB)
	}
	return err
}

// demoWindow is the payment window of the demo's lifecycle sales.
const demoWindow = 2 * time.Second

// demoLifecycle is the demo's second set of runs: the safe strategies at
// once, each selling a small stock with a payment window in which some
// buyers cancel and some never pay, until every unit is paid.
func demoLifecycle(cfg benchConfig) *benchConfig {
	c := cfg
	c.strategies = strings.Join(strategyNames(func(e strategyEntry) bool { return !isUnsafe(e) }), ",")
	c.stock, c.users, c.requests, c.concurrency = 10, 60, 0, min(20, cfg.concurrency)
	c.rules = benchRules{quantityMax: 1, limit: 1, window: demoWindow, pay: 0.8, cancel: 0.1, saleFor: 20 * time.Second}
	c.parallel = true
	return &c
}

// runParallel runs each strategy's sale at once, each on instances and, on
// embedded backends, a Redis and a database of its own, and returns the
// rows worth showing in the order named; their progress shares one line
// (fl.progress).
func (fl *fleets) runParallel(ctx context.Context, authn *auth.Authenticator, log *slog.Logger, stderr io.Writer) ([]lab.Row, error) {
	runs := restrictedRuns(&fl.cfg.rules, fl.cfg.strategyList(), fl.cfg.locks.kinds)
	rows, shown, errs := make([]lab.Row, len(runs)), make([]bool, len(runs)), make([]error, len(runs))
	apart := make([]fleets, len(runs))
	for i := range runs {
		apart[i] = *fl
		if fl.inProcess() {
			b, err := openBackends(ctx, backendFlags{}, log)
			if err != nil {
				return nil, err
			}
			defer b.Close()
			apart[i].b = b
		}
	}
	var wg sync.WaitGroup
	for i, name := range runs {
		wg.Go(func() { rows[i], shown[i], errs[i] = apart[i].runOne(ctx, name, authn, log, fl.progress(stderr)) })
	}
	wg.Wait()
	var out []lab.Row
	for i := range runs {
		if shown[i] {
			out = append(out, rows[i])
		}
	}
	return out, errors.Join(errs...)
}

// realBenchCommand is the bench command line that runs the demo's sale
// on real servers.
func realBenchCommand(cfg benchConfig) string {
	return fmt.Sprintf("flashsale bench --strategy %s %s %s %s (create the database first)",
		strings.Join(strategies(), ","), realBenchLoad(cfg), realBenchRedis, realBenchDB)
}

// realBenchLoad are the flags that give bench the demo's load.
func realBenchLoad(cfg benchConfig) string {
	return fmt.Sprintf("--instances %d --race-window %s", max(cfg.instances, 3), max(cfg.raceWindow, 2*time.Millisecond))
}

// realBenchRedis and realBenchDB are the flags that point bench at local
// servers: a database and a Redis prefix of the lab's own, since a prefix
// belongs to one database (owner.go).
const (
	labRedisDB, labPrefix, labDB = "0", "lab:", "flashsale_lab"
	realBenchRedis               = "--redis redis://127.0.0.1:6379/" + labRedisDB + " --redis-prefix " + labPrefix
	realBenchDB                  = "--db mysql://root@127.0.0.1:3306/" + labDB
)
