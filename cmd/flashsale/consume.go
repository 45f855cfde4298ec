package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/lifecycle"
	"github.com/flashsale/flashsale/metrics"
)

// consumerFlags configure the async pipeline's stream consumer.
type consumerFlags struct {
	name      string
	batch     int
	claimIdle time.Duration
	linger    time.Duration
	heartbeat time.Duration
	maxDeliv  int64
	// measure wraps what the consumer persists through (observe.go).
	measure func(consume.Persister) consume.Persister
	retire  time.Duration
	// durability is consume's own: how durably its expirer's returns are
	// put back, and with replica, what the consumer may persist (serve
	// registers its own, for the gate too).
	durability durabilityFlags
}

func (f *consumerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "consumer-name", "", "this consumer's name in the group (default hostname-pid-random; must be unique per process)")
	fs.IntVar(&f.batch, "batch", 500, "orders per read and per MySQL transaction; while Redis is slow (an ack over 20ms) reads shrink, down to a quarter of it")
	fs.DurationVar(&f.linger, "read-linger", 20*time.Millisecond, "after a read that brought under a quarter of --batch orders, wait this long before the next, so reads, acks and transactions are shared by more orders (0: never)")
	fs.DurationVar(&f.claimIdle, "claim-idle", 30*time.Second, "take over entries another consumer left unacknowledged this long, alive or not (the fallback for one that is stuck)")
	fs.DurationVar(&f.heartbeat, "heartbeat", 5*time.Second, "lifetime of this consumer's heartbeat in Redis, renewed every fifth of it; the entries of a consumer whose heartbeat expired (it died) are taken over at once")
	fs.DurationVar(&f.retire, "retire-after", time.Hour, "delete a finished sale's Redis keys this long after it is over and drained with nothing open in reconcile (negative: never); MySQL answers for it then")
	fs.Int64Var(&f.maxDeliv, "max-deliveries", 5, "persist an entry delivered more than this many times on its own; dead-letter it when that many attempts on its own died")
}

// validate refuses settings that would stop orders from reaching MySQL:
// an empty batch, a claim time too short for a batch to be persisted (the
// persist timeout is a third of it), or no delivery before dead-lettering.
func (f *consumerFlags) validate() error {
	switch {
	case f.batch < 1:
		return fmt.Errorf("--batch must be at least 1, got %d", f.batch)
	case f.linger < 0 || f.linger > time.Second:
		return fmt.Errorf("--read-linger must be between 0 and 1s (orders wait that long on their way to MySQL), got %v", f.linger)
	case f.claimIdle < time.Second:
		return fmt.Errorf("--claim-idle must be at least 1s (well above the time one batch takes to persist), got %v", f.claimIdle)
	case f.heartbeat < time.Second:
		return fmt.Errorf("--heartbeat must be at least 1s (a live consumer that misses it for that long loses its entries), got %v", f.heartbeat)
	case f.maxDeliv < 1:
		return fmt.Errorf("--max-deliveries must be at least 1, got %d", f.maxDeliv)
	}
	return nil
}

// needServers refuses embedded backends for a command that works on what
// servers already hold: an embedded Redis and SQLite file start empty.
func needServers(cmd string, b backendFlags) error {
	if b.Embedded() {
		return fmt.Errorf("%s needs --redis and --db (and --redis-prefix, if not the default) of the servers whose orders it works on", cmd)
	}
	return nil
}

// retireAfter is --retire-after as ConsumerConfig takes it, where 0 means
// the default: a flag of 0 retires at the next sweep.
func (f *consumerFlags) retireAfter() time.Duration {
	if f.retire == 0 {
		return time.Nanosecond
	}
	return f.retire
}

// new returns the consumer; with durability replica (d: serve's flags, or
// consume's own) it persists only what the replicas have.
func (f *consumerFlags) new(b *backends, d async.DurabilityConfig, log *slog.Logger) *consume.Consumer {
	cfg := consume.Config{
		Prefix:        b.prefix,
		Name:          f.name,
		BatchSize:     f.batch,
		ClaimIdle:     f.claimIdle,
		Linger:        cmp.Or(f.linger, -1), // 0 on the command line: never
		Heartbeat:     f.heartbeat,
		MaxDeliveries: f.maxDeliv,
		RetireAfter:   f.retireAfter(),
		Audit:         b.db,
		Logger:        log,
	}
	if d.Mode == async.DurabilityReplica {
		cfg.MinReplicas, cfg.ReplicaTimeout = d.MinReplicas, d.ReplicaTimeout
	}
	return consume.New(b.redis, f.persister(b), cfg)
}

func consumeCommand(stdout, stderr io.Writer) *ffcli.Command {
	var (
		backendsCfg backendFlags
		consumerCfg consumerFlags
		metricsAddr string
		pprofOn     bool
		logs        logFlags
	)
	fs := flag.NewFlagSet("flashsale consume", flag.ContinueOnError)
	backendsCfg.registerServers(fs)
	consumerCfg.register(fs)
	consumerCfg.durability.register(fs)
	fs.StringVar(&metricsAddr, "metrics-addr", "", "serve /metrics (and, with --pprof, /debug/pprof) on this address (default: no listener)")
	fs.BoolVar(&pprofOn, "pprof", false, "serve /debug/pprof on --metrics-addr")
	logs.register(fs)
	return &ffcli.Command{
		Name:       "consume",
		ShortUsage: "flashsale consume --redis URL --db URL [flags]",
		ShortHelp:  "persist async orders to MySQL, expire unpaid ones (no HTTP)",
		LongHelp: "Persists the orders the async gate accepted, and, as every serve does, expires orders past their pay_by " +
			"and puts their units back into the gate's stock (--durability says how durably, as serve's does). " +
			"With --durability replica it persists only orders --min-replicas replicas have (as serve --consume does).",
		FlagSet: fs,
		Options: envOptions(),
		Exec: noArgs(func(ctx context.Context) error {
			if err := cmp.Or(needServers("consume", backendsCfg), consumerCfg.validate(), consumerCfg.durability.validate()); err != nil {
				return usage(err)
			}
			if pprofOn && metricsAddr == "" {
				return usage(errors.New("--pprof needs --metrics-addr"))
			}
			return runConsumer(ctx, backendsCfg, consumerCfg, metricsAddr, pprofOn, logs.logger(stderr), stdout)
		}),
	}
}

// runConsumer runs a consumer until ctx is cancelled; with metricsAddr, its
// metrics are served there as serve's --metrics-addr serves them.
func runConsumer(ctx context.Context, bf backendFlags, cf consumerFlags, metricsAddr string, pprofOn bool, log *slog.Logger, stdout io.Writer) error {
	b, err := openBackends(ctx, bf, log)
	if err != nil {
		return err
	}
	defer b.Close()
	var m *metrics.Metrics
	if metricsAddr != "" {
		m = metrics.New("") // takes no orders
		srv, _, err := listenMetrics(metricsAddr, m, pprofOn, log)
		if err != nil {
			return err
		}
		defer stopMetrics(srv)
		cf.measure = m.Persister
	}
	c := cf.new(b, cf.durability.config(), log)
	if m != nil {
		m.WatchConsumer(c)
	}
	life := lifecycle.New(b.db, lifecycle.Config{Logger: log,
		Restocker: async.Returns(b.redis, async.Config{Prefix: b.prefix, Durability: cf.durability.config()})})
	var expirer lifecycle.ExpirerConfig
	if m != nil {
		m.WatchLifecycle(life)
		expirer.ObserveLag = m.ObserveExpiryLag
	}
	fmt.Fprintf(stdout, "flashsale: consuming as %s\n", c.Name())
	var wg sync.WaitGroup
	wg.Go(func() { _ = life.Run(ctx, expirer) })
	err = c.Run(ctx)
	wg.Wait()
	fmt.Fprintf(stdout, "flashsale: stopped: %s\n", consumerSummary(c))
	return err
}
