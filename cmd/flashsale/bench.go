package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/internal/statusline"
	"github.com/flashsale/flashsale/lab"
)

// benchConfig is everything `flashsale bench` is configured with.
type benchConfig struct {
	strategies  string
	instances   int
	targets     string
	jwtSecret   jwtSecretFlags
	adminToken  adminTokenFlags // with --target
	stock       int
	shards      int
	users       int
	requests    int
	concurrency int
	rate        float64
	doubles     float64
	seed        uint64
	timeout     time.Duration
	drain       time.Duration
	startup     time.Duration
	jsonPath    string
	wide        bool
	htmlPath    string // report.go
	serverBin   string
	raceWindow  time.Duration
	rateUser    float64
	rateIP      float64
	lockWait    time.Duration
	locks       lockFlags   // stocklock.go
	rules       benchRules  // benchrules.go
	crowd       benchCrowd  // benchcrowd.go
	events      benchEvents // events.go
	backends    backendFlags
	// then is a second set of runs on the same backends, reported apart
	// (demo's sales with a payment window); parallel runs a set's
	// strategies at once, each on its own instances.
	then     *benchConfig
	parallel bool
	// line, when set (the demo), shows the runs' progress on one line.
	line *statusline.Line
}

func (c *benchConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.strategies, "strategy", strings.Join(strategies(), ","), "comma-separated strategies to run, one row each (with --target: the one label of the servers' strategy)")
	fs.IntVar(&c.instances, "instances", 1, "service instances per strategy, sharing Redis and the database; load goes round robin across them")
	fs.StringVar(&c.targets, "target", "", "comma-separated base URLs of running servers to load instead of starting instances (needs --jwt-secret, --admin-token(-file), --redis, --db and --redis-prefix of those servers)")
	c.jwtSecret.register(fs, "with --target: the servers' JWT secret, to mint buyer tokens")
	c.adminToken.register(fs) // with --target: the servers', to create vouchers
	fs.IntVar(&c.stock, "stock", 200, "stock of each run's fresh voucher (200 of 1000 buyers: enough that optimistic's undersell shows on SQLite too)")
	fs.IntVar(&c.shards, "shards", 1, "async: split each voucher's stock into this many Redis shards (1-64; docs/operations.md, shards)")
	fs.IntVar(&c.users, "users", 1000, "buyers (user ids 1..users)")
	fs.IntVar(&c.requests, "requests", 0, "order attempts per run, spread over the buyers (default 3×users)")
	fs.IntVar(&c.concurrency, "concurrency", 200, "requests in flight (closed model), or at most in flight (open model)")
	fs.Float64Var(&c.rate, "rate", 0, "open model: requests per second on a fixed schedule, latency measured from the scheduled time (0: closed model)")
	fs.Float64Var(&c.doubles, "double-clicks", 0.25, "chance that a buyer's click is a double click: two requests released together")
	fs.Uint64Var(&c.seed, "seed", 1, "shuffles the order of the clicks; the same seed gives the same plan")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up on one request after this (a transport error)")
	fs.DurationVar(&c.drain, "drain-timeout", time.Minute, "async: how long to wait for the consumers to persist every accepted order before auditing")
	fs.DurationVar(&c.startup, "startup-timeout", 30*time.Second, "how long an instance may take to serve and be ready")
	c.registerOutput(fs)
	fs.StringVar(&c.serverBin, "server-bin", "", "the flashsale binary to start child instances with (default: this one)")
	fs.DurationVar(&c.raceWindow, "race-window", 0, "passed to the instances: sleep between reading and writing stock")
	fs.Float64Var(&c.rateUser, "rate-limit-user", 0, "passed to the instances: order requests per second per user (0: no limit)")
	fs.Float64Var(&c.rateIP, "rate-limit-ip", 0, "passed to the instances: order requests per second per client IP (0: no limit)")
	fs.DurationVar(&c.lockWait, "lock-wait", time.Second, "passed to the instances: how long the lock strategy waits for a buyer's lock")
	c.locks.register(fs, true)
	c.rules.register(fs)
	c.crowd.register(fs)
	c.events.register(fs)
	c.backends.register(fs)
}

// registerOutput registers the flags of what is written: --json, --wide.
func (c *benchConfig) registerOutput(fs *flag.FlagSet) {
	fs.StringVar(&c.jsonPath, "json", "", "also write the setup and the runs as JSON to this file")
	fs.BoolVar(&c.wide, "wide", false, fmt.Sprintf("print every column of the table (about %d characters wide, the refusals by code last), not the ones that fit 100", wideColumns))
	registerHTML(fs, c)
}

// wideColumns is about how wide --wide's table is: the demo's measured 271
// (TestDemo keeps it within wideSlack, and docs/testing.md saying it).
const wideColumns = 270

// strategyList returns the --strategy names.
func (c *benchConfig) strategyList() []string {
	return splitList(c.strategies)
}

// targetList returns the --target URLs.
func (c *benchConfig) targetList() []string {
	return splitList(c.targets)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (c *benchConfig) validate() error {
	if c.crowd.on() && c.requests != 0 {
		return errors.New("--requests does not apply with --bots or --admission: each person clicks once, each bot until it buys or hears sold_out")
	}
	if c.requests == 0 {
		c.requests = 3 * c.users
	}
	names := c.strategyList()
	switch {
	case len(names) == 0:
		return errors.New("--strategy names no strategy")
	case c.stock <= 0 || c.users <= 0:
		return errors.New("--stock and --users must be positive")
	case c.requests < c.users:
		return fmt.Errorf("--requests (%d) must be at least --users (%d)", c.requests, c.users)
	case c.concurrency < 2:
		return errors.New("--concurrency must be at least 2 (a double click is two requests in flight)")
	case !(c.rate >= 0) || !(c.doubles >= 0 && c.doubles <= 1): // NaN too
		return errors.New("--rate must not be negative and --double-clicks must be within [0, 1]")
	case c.raceWindow < 0 || !(c.rateUser >= 0) || !(c.rateIP >= 0): // NaN too
		return errors.New("--race-window and the rate limits must not be negative")
	case c.timeout <= 0 || c.drain <= 0 || c.startup <= 0 || c.lockWait <= 0:
		return errors.New("--timeout, --drain-timeout, --startup-timeout and --lock-wait must be positive")
	}
	if err := c.backends.validate(); err != nil {
		return err
	}
	if err := c.rules.validate(c.stock, c.targets != ""); err != nil {
		return err
	}
	if err := c.crowd.validate(c); err != nil {
		return err
	}
	if err := c.locks.validate(slices.Contains(names, "stocklock")); err != nil {
		return err
	}
	if c.targets != "" {
		return c.validateTarget(names)
	}
	if c.instances < 1 {
		return errors.New("--instances must be at least 1")
	}
	for _, n := range names {
		if !slices.Contains(strategies(), n) {
			return fmt.Errorf("--strategy: unknown strategy %q (want %s)", n, strings.Join(strategies(), ", "))
		}
	}
	if len(restrictedRuns(&c.rules, names, c.locks.kinds)) == 0 {
		return errors.New("--strategy names only unsafe strategies, which refuse --payment-window and a --limit-per-buyer above 1")
	}
	return nil
}

// validateTarget checks that --target comes with what bench needs of the
// running servers, and names all that is missing in one error.
func (c *benchConfig) validateTarget(names []string) error {
	var missing []string
	if len(names) != 1 {
		missing = append(missing, "--strategy with one label (the servers' strategy)")
	}
	if c.jwtSecret == (jwtSecretFlags{}) {
		missing = append(missing, "--jwt-secret or --jwt-secret-file (to mint buyer tokens)")
	}
	if c.adminToken == (adminTokenFlags{}) {
		missing = append(missing, "--admin-token-file or --admin-token (to create the voucher)")
	}
	if c.backends.redis == "" {
		missing = append(missing, "--redis")
	}
	if c.backends.db == "" {
		missing = append(missing, "--db")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("with --target, give the running servers' settings; missing: %s (the audit reads their Redis and database; give --redis-prefix too if theirs is not the default)",
		strings.Join(missing, ", "))
}

// targetExample is a whole bench --target command line, for help bench.
const targetExample = `  flashsale bench --target http://127.0.0.1:8080,http://127.0.0.1:8081 \
    --strategy async --jwt-secret-file jwt.secret \
    --admin-token-file admin.token \
    --redis redis://127.0.0.1:6379/0 --redis-prefix flashsale: \
    --db mysql://root@127.0.0.1:3306/flashsale`

func benchCommand(stdout, stderr io.Writer) *ffcli.Command {
	var cfg benchConfig
	fs := flag.NewFlagSet("flashsale bench", flag.ContinueOnError)
	cfg.register(fs)
	return &ffcli.Command{
		Name:       "bench",
		ShortUsage: "flashsale bench [--strategy a,b] [--instances N] [--redis URL --db URL]",
		ShortHelp:  "the load lab: a flash sale per strategy, audited, in one table",
		LongHelp: "Starts --instances servers per strategy (child processes when --redis and a MySQL --db are both given, " +
			"otherwise in this process, sharing its embedded backends) or loads running ones (--target), creates a fresh " +
			"voucher, sends --requests order attempts of --users buyers (some double clicks), audits MySQL and Redis " +
			"(oversold, duplicate buyers, lost orders, undersold stock, stock drift), measures the same requests on " +
			"GET /healthz, closed loop, as the ceiling, and prints one row per strategy. With --payment-window the buyers pay, cancel or " +
			"abandon their orders and keep trying until every unit is paid, and a second table says what became of the orders (paid, " +
			"cancelled, expired, returned, resold, paid after close). Exits non-zero when requests got no usable answer " +
			"or a run could not be completed; a strategy that oversells is what the table is for, not a failure.\n\n" +
			"Against running servers, give their strategy (the row's label), JWT secret, admin token, Redis, key prefix and database:\n\n" +
			targetExample,
		FlagSet: fs,
		Options: envOptions(),
		Exec: noArgs(func(ctx context.Context) error {
			if err := cfg.validate(); err != nil {
				return usage(err)
			}
			_, err := runBench(ctx, cfg, stdout, stderr)
			return err
		}),
	}
}

// runBench runs every strategy, prints the table and the verdicts, writes
// the JSON, and returns the runs with the errors that make the run fail.
func runBench(ctx context.Context, cfg benchConfig, stdout, stderr io.Writer) (lab.Report, error) {
	logDir, err := os.MkdirTemp("", "flashsale-bench-")
	if err != nil {
		return lab.Report{}, err
	}
	logFile, err := os.Create(filepath.Join(logDir, "bench.log"))
	if err != nil {
		return lab.Report{}, err
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, nil))
	rep, err := benchRuns(ctx, cfg, logDir, log, stdout, stderr)
	err = errors.Join(err, printRuns(stdout, rep.Runs, cfg.wide))
	if l := rep.Lifecycle; l != nil && len(l.Runs) > 0 {
		fmt.Fprintln(stdout)
		say(stdout, "Then, with a payment window: "+l.Setup.Sale()+".")
		err = errors.Join(err, printRuns(stdout, l.Runs, cfg.wide))
	}
	err = errors.Join(err, writeReport(cfg.jsonPath, "--json", rep, lab.WriteJSON, stdout), writeReport(cfg.htmlPath, "--html", rep, lab.WriteHTML, stdout))
	if err != nil {
		log.Error("bench failed", "err", err)
		fmt.Fprintf(stderr, "flashsale bench: logs kept in %s: %s\n", logDir, strings.Join(logNames(logDir), ", "))
		return rep, err
	}
	os.RemoveAll(logDir)
	return rep, nil
}

// benchRuns opens the backends and runs each strategy on fresh instances.
func benchRuns(ctx context.Context, cfg benchConfig, logDir string, log *slog.Logger, stdout, stderr io.Writer) (rep lab.Report, _ error) {
	rep.Setup = cfg.setup()
	b, err := openBackends(ctx, cfg.backends, log)
	if err != nil {
		return rep, err
	}
	defer b.Close()
	secret, err := cfg.jwtSecret.value()
	if err != nil {
		return rep, err
	}
	admin, err := cfg.adminToken.value()
	if err != nil {
		return rep, err
	}
	if cfg.targets == "" {
		secret, admin = randomHex(32), randomHex(16)
	}
	authn, err := auth.New(secret, admin)
	if err != nil {
		return rep, err
	}
	secretDir, err := os.MkdirTemp("", "flashsale-bench-secret-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(secretDir)
	fl := &fleets{cfg: cfg, b: b, logDir: logDir, secret: secret, admin: admin, id: randomHex(3)}
	rep.Setup.Mode, rep.Setup.Redis, rep.Setup.DB = fl.mode(), fl.redis(), fl.db()
	say(stdout, fl.describe())
	say(stdout, describeLoad(rep.Setup))
	say(stdout, lab.CeilingNote())
	if rep.Runs, err = fl.runSet(ctx, authn, secretDir, log, stdout, stderr); err != nil || cfg.then == nil {
		return rep, err
	}
	then := *fl
	then.cfg, then.logDir = *cfg.then, filepath.Join(logDir, "then") // its instances' logs apart
	then.cfg.rules.saleFor = saleBound(then.cfg.rules.saleFor, rep.Runs)
	if err := os.Mkdir(then.logDir, 0o700); err != nil {
		return rep, err
	}
	rep.Lifecycle = &lab.Report{Setup: then.cfg.setup()}
	rep.Lifecycle.Setup.Mode, rep.Lifecycle.Setup.Redis, rep.Lifecycle.Setup.DB = then.mode(), then.redis(), then.db()
	if then.cfg.parallel && then.inProcess() { // runParallel
		rep.Lifecycle.Setup.Redis, rep.Lifecycle.Setup.DB = "embedded, one per strategy", "embedded SQLite, one per strategy"
	}
	rep.Lifecycle.Runs, err = then.runSet(ctx, authn, secretDir, log, stdout, stderr)
	return rep, err
}

// saleBound is how long the second set's sales stay on sale: base, or on
// a machine slower than base assumes, saleScale times the first set's
// longest sale (measured here, under this machine's load), so that their
// buyers stop when every unit is paid, not when a clock set for another
// machine runs out.
func saleBound(base time.Duration, first []lab.Row) time.Duration {
	for _, r := range first {
		base = max(base, (time.Duration(r.ElapsedMs*saleScale) * time.Millisecond).Round(time.Second))
	}
	return base
}

// saleScale: a second-set sale has 60 buyers and waves of returned units
// where a first-set sale has 900 clicks.
const saleScale = 10

// logNames lists the logs in dir: bench.log, the lab's own, and one per
// instance started.
func logNames(dir string) []string {
	entries, _ := os.ReadDir(dir) // what could be read is what is named
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// setup is what cfg says of how the runs are made; the mode and the
// backends are the fleets' (benchRuns).
func (c benchConfig) setup() lab.Setup {
	s := lab.Setup{Targets: c.targetList(), Instances: c.instances, RaceWindow: c.raceWindow.String(),
		Stock: c.stock, Shards: max(c.shards, 1), Users: c.users, Requests: c.requests, DoubleClicks: c.doubles, Seed: c.seed,
		Concurrency: c.concurrency, Rate: c.rate, Machine: lab.Machine()}
	c.rules.describe(&s)
	c.crowd.describe(&s)
	if c.targets != "" {
		s.Instances, s.RaceWindow = len(s.Targets), "" // the running servers' own
	}
	return s
}

// describeLoad says what load each run gets.
func describeLoad(s lab.Setup) string {
	window := ""
	if s.RaceWindow != "" {
		window = ", race window " + s.RaceWindow
	}
	return fmt.Sprintf("load: %s, %s%s; machine %s", s.Sale(), s.Model(), window, s.Machine)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b)
}
