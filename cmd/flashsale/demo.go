package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
)

// demoCommand is a small bench of every strategy on embedded backends:
// the classic flash-sale stress test in well under a minute, with nothing to
// install.
func demoCommand(stdout, stderr io.Writer) *ffcli.Command {
	var (
		cfg       benchConfig
		redis, db refusedFlag
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
	fs.Var(&redis, "redis", "refused: the demo runs on embedded backends only (bench runs on real servers)")
	fs.Var(&db, "db", "refused: the demo runs on embedded backends only (bench runs on real servers)")
	return &ffcli.Command{
		Name:       "demo",
		ShortUsage: "flashsale demo [flags]",
		ShortHelp:  "a small sale per strategy on embedded backends, audited",
		LongHelp: fmt.Sprintf("Runs a small flash sale for each of the %d strategies (%s) on 3 in-process instances with a 2ms race "+
			"window, on an embedded Redis (miniredis) and SQLite: no servers needed, and no environment variables "+
			"read. For MySQL and Redis use flashsale bench --redis URL --db URL.", len(strategies()), strings.Join(strategies(), ", ")),
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
	rows, err := runBench(ctx, cfg, stdout, stderr)
	for _, r := range rows {
		if r.Strategy == "mutex" && r.Instances > 1 && !r.Exact() {
			say(stdout, fmt.Sprintf("mutex locks within one instance only: with %d instances, %d buyers still race each other (try --instances 1).", r.Instances, r.Instances))
		}
	}
	fmt.Fprintln(stdout)
	say(stdout, fmt.Sprintf("The demo took %s. The same against MySQL and Redis, with each instance a process of its own (create the database first):",
		time.Since(start).Round(100*time.Millisecond)))
	fmt.Fprintf(stdout, "  flashsale bench --strategy %s \\\n    %s \\\n    %s \\\n    %s\n", strings.Join(strategies(), ","), realBenchLoad(cfg), realBenchRedis, realBenchDB)
	return err
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
	realBenchRedis = "--redis redis://127.0.0.1:6379/0 --redis-prefix lab:"
	realBenchDB    = "--db mysql://root@127.0.0.1:3306/flashsale_lab"
)
