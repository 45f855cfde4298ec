package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/internal/secretfile"
	"github.com/flashsale/flashsale/ratelimit"
	"github.com/flashsale/flashsale/strategy"
)

// serveConfig is everything `flashsale serve` is configured with.
type serveConfig struct {
	addr        string
	strategy    string
	jwtSecret   jwtSecretFlags
	adminToken  adminTokenFlags // secret.go
	rateUser    float64
	rateIP      float64
	raceWindow  time.Duration
	lockWait    time.Duration
	trustProxy  bool
	backends    backendFlags
	shutdownFor time.Duration
	consume     bool
	consumer    consumerFlags
	metricsAddr string // observe.go: /metrics (and --pprof) on their own listener
	pprof       bool   // /debug/pprof on --metrics-addr
	openMetrics bool   // /metrics on --addr too
	durability  durabilityFlags
	locks       lockFlags // stocklock.go
	payments    paymentFlags
	expireEvery time.Duration
	admission   admissionFlags     // admission.go
	provider    auth.ProviderFlags // provider.go
	events      eventFlags         // events.go
	maxPending  int                // async.Config.MaxPending
	maxGateWait time.Duration      // async.Config.MaxGateWait
	shardLinger time.Duration      // async.Config.ShardLinger; 0: none
}

// The rate limits serve ships with: a buyer clicks a few times a
// second at most; an address may front many buyers (a carrier's NAT).
const (
	defaultRateUser = 5
	defaultRateIP   = 200
)

// strategyEntry is one value of --strategy: how serve builds it.
type strategyEntry struct {
	name string
	// unsafe, for a strategy that breaks an invariant by design (the
	// lab's), says how; serve warns at start.
	unsafe string
	// validate checks the flags only this strategy reads; nil if none.
	validate func(c *serveConfig) error
	// build returns the strategy's services over b.
	build func(cfg serveConfig, b *backends, log *slog.Logger) (*services, error)
}

// strategyTable lists what --strategy accepts: the synchronous strategies,
// from the unsafe to the safe, then async.
func strategyTable() []strategyEntry {
	table := make([]strategyEntry, 0, len(strategy.Names)+1)
	for _, name := range strategy.Names {
		table = append(table, strategyEntry{name: name, unsafe: unsafeStrategies[name], build: newSyncServices})
	}
	return append(table, strategyEntry{name: "async", validate: validateAsync, build: newAsyncServices})
}

// unsafeStrategies are the lab's strategies that break an invariant by
// design, and how (strategy's package doc).
var unsafeStrategies = map[string]string{
	"naive":      "loses stock updates and oversells",
	"mutex":      "oversells with more than one instance (its mutex is per process)",
	"optimistic": "turns buyers away while stock is left (undersells)",
}

func isUnsafe(e strategyEntry) bool { return e.unsafe != "" }

// lookupStrategy returns the entry of the strategy called name.
func lookupStrategy(name string) (strategyEntry, bool) {
	i := slices.IndexFunc(strategyTable(), func(e strategyEntry) bool { return e.name == name })
	if i < 0 {
		return strategyEntry{}, false
	}
	return strategyTable()[i], true
}

// strategies lists the names --strategy accepts.
func strategies() []string {
	return strategyNames(func(strategyEntry) bool { return true })
}

// strategyNames lists the names of the entries keep keeps.
func strategyNames(keep func(strategyEntry) bool) []string {
	var names []string
	for _, e := range strategyTable() {
		if keep(e) {
			names = append(names, e.name)
		}
	}
	return names
}

func (c *serveConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&c.strategy, "strategy", "conditional", "how orders are taken: "+
		strings.Join(strategyNames(func(e strategyEntry) bool { return !isUnsafe(e) }), ", ")+
		"; lab only, UNSAFE BY DESIGN (they oversell or undersell): "+
		strings.Join(strategyNames(isUnsafe), ", "))
	c.jwtSecret.register(fs, "HS256 secret for user tokens")
	c.adminToken.register(fs)
	fs.Float64Var(&c.rateUser, "rate-limit-user", defaultRateUser, "order and queue requests per second per user, bursts of as many (0: no limit)")
	fs.Float64Var(&c.rateIP, "rate-limit-ip", defaultRateIP, "order and queue requests per second per client IP, per /64 for IPv6, bursts of as many (0: no limit)")
	fs.DurationVar(&c.raceWindow, "race-window", 0, "sleep between reading and writing stock, to make races visible")
	fs.DurationVar(&c.lockWait, "lock-wait", time.Second, "how long the lock strategy waits for a buyer's lock before answering busy")
	fs.BoolVar(&c.trustProxy, "trust-proxy", false, "take the client IP from the last X-Forwarded-For entry, the one the reverse proxy in front added (one hop; an entry that is not an address: the peer's)")
	fs.DurationVar(&c.shutdownFor, "shutdown-timeout", 30*time.Second, "how long to wait for in-flight requests on shutdown")
	fs.BoolVar(&c.consume, "consume", true, "with --strategy async, run the stream consumer in this process")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve /metrics (and, with --pprof, /debug/pprof) on this address, for the operators' network only")
	fs.BoolVar(&c.pprof, "pprof", false, "serve /debug/pprof on --metrics-addr (never on --addr)")
	fs.BoolVar(&c.openMetrics, "public-metrics", false, "serve /metrics on --addr too, to anyone (it shows the backlog, dead letters and drift the dashboard keeps for the admin)")
	fs.DurationVar(&c.expireEvery, "expire-every", 100*time.Millisecond, "how often to expire orders past their pay_by and put their units back on sale (every instance does; each order expires once)")
	fs.IntVar(&c.maxPending, "max-pending", 0, "with --strategy async, the most orders on their way to Redis at once in this instance; past it an order is answered 503 busy with Retry-After (0: 2048)")
	fs.DurationVar(&c.maxGateWait, "max-gate-wait", 0, "with --strategy async, the longest orders may queue for a voucher's Redis gate; while they wait longer, an order is answered 503 busy with Retry-After (0: 40ms)")
	fs.DurationVar(&c.shardLinger, "shard-linger", async.DefaultShardLinger, "with --strategy async, the longest a gate call of a voucher of K shards waits for K times the orders that queued during its shard's previous call: fewer, larger calls cost Redis less per order, for at most this more per order (0: never wait)")
	c.payments.register(fs)
	c.admission.register(fs)
	c.backends.register(fs)
	c.consumer.register(fs)
	c.durability.register(fs)
	c.locks.register(fs, false)
	registerProvider(fs, &c.provider)
	c.events.register(fs)
}

func (c *serveConfig) validate() error {
	entry, ok := lookupStrategy(c.strategy)
	if !ok {
		return fmt.Errorf("--strategy must be one of %s, got %q", strings.Join(strategies(), ", "), c.strategy)
	}
	if !(c.rateUser >= 0) || !(c.rateIP >= 0) { // NaN too
		return errors.New("--rate-limit-user and --rate-limit-ip must be numbers, not negative")
	}
	if c.raceWindow < 0 {
		return errors.New("--race-window must not be negative")
	}
	if c.lockWait <= 0 || c.shutdownFor <= 0 {
		return errors.New("--lock-wait and --shutdown-timeout must be positive")
	}
	if c.expireEvery <= 0 {
		return errors.New("--expire-every must be positive")
	}
	if c.maxPending < 0 || c.maxGateWait < 0 {
		return errors.New("--max-pending and --max-gate-wait must not be negative (0: the default)")
	}
	if c.shardLinger < 0 {
		return errors.New("--shard-linger must not be negative (0: never wait)")
	}
	if c.pprof && c.metricsAddr == "" {
		return errors.New("--pprof needs --metrics-addr: profiles are never served on --addr")
	}
	if _, err := c.payments.secret(); err != nil {
		return err
	}
	if err := c.admission.validate(); err != nil {
		return err
	}
	if err := c.events.validate(); err != nil {
		return err
	}
	if c.strategy != "async" && c.durability.mode != string(async.DurabilityMemory) {
		return errors.New("--durability applies to --strategy async (the others write MySQL before they answer)")
	}
	if err := c.locks.validate(c.strategy == "stocklock"); err != nil {
		return err
	}
	if entry.validate != nil {
		if err := entry.validate(c); err != nil {
			return err
		}
	}
	if _, _, err := c.provider.Provider(); err != nil {
		return err
	}
	_, err := c.authenticator() // before an embedded backend starts
	return err
}

// authenticator verifies the tokens of --jwt-secret and --admin-token.
func (c *serveConfig) authenticator() (*auth.Authenticator, error) {
	secret, err := c.jwtSecret.value()
	if err != nil {
		return nil, err
	}
	if secret == "" {
		return nil, errors.New("no JWT secret: set --jwt-secret, --jwt-secret-file or FLASHSALE_JWT_SECRET (at least 32 bytes; user tokens are signed with it)")
	}
	admin, err := c.adminToken.value()
	if err != nil {
		return nil, err
	}
	authn, err := auth.New(secret, admin)
	if err != nil {
		return nil, fmt.Errorf("%w (set --jwt-secret, --jwt-secret-file or FLASHSALE_JWT_SECRET)", err)
	}
	return authn, nil
}

func serveCommand(stdout, stderr io.Writer) *ffcli.Command {
	var (
		cfg  serveConfig
		logs logFlags
	)
	fs := flag.NewFlagSet("flashsale serve", flag.ContinueOnError)
	cfg.register(fs)
	logs.register(fs)
	return &ffcli.Command{
		Name:       "serve",
		ShortUsage: "flashsale serve [flags]",
		ShortHelp:  "run the HTTP service",
		LongHelp: fmt.Sprintf("Serves the HTTP API, the live dashboard at %s (GET / leads there) and /metrics. "+
			"User tokens (flashsale token) are HS256 JWTs signed with --jwt-secret, or the identity provider's (--oidc-issuer), accepted until %s past their exp "+
			"(and from %s before their nbf), for clocks that differ. %s break an invariant by "+
			"design: they are for the load lab, and serve warns when it runs one.", dashboardPath, auth.Leeway, auth.Leeway,
			strings.Join(strategyNames(isUnsafe), ", ")),
		FlagSet: fs,
		Options: envOptions(),
		Exec: noArgs(func(ctx context.Context) error {
			if err := cfg.validate(); err != nil {
				return usage(err)
			}
			log := logs.logger(stderr)
			return serve(ctx, cfg, log, stdout)
		}),
	}
}

// serve runs the service until ctx is cancelled, then drains in-flight
// requests and closes the backends.
func serve(ctx context.Context, cfg serveConfig, log *slog.Logger, stdout io.Writer) error {
	b, err := openBackends(ctx, cfg.backends, log)
	if err != nil {
		return err
	}
	defer b.Close()
	inst, err := startInstance(cfg, b, log)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "flashsale: serving %s (strategy %s); dashboard: %s%s\n", inst.URL, cfg.strategy, inst.URL, dashboardPath)
	warnUnsafe(cfg, log, stdout)
	warnNoAdminToken(cfg, log)
	secretfile.Warn(log, map[string]string{"--jwt-secret-file": cfg.jwtSecret.file, "--admin-token-file": cfg.adminToken.file, "--payment-secret-file": cfg.payments.file})
	started := time.Now()
	defer func() { fmt.Fprintln(stdout, serveSummary(inst, cfg, time.Since(started))) }()
	select {
	case err := <-inst.failed:
		inst.Stop(context.WithoutCancel(ctx))
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdownFor)
	defer cancel()
	return inst.Stop(sctx)
}

// instance is one running service: an HTTP server and, for async, its
// consumer, on backends it shares with whoever opened them.
type instance struct {
	URL    string // http://host:port
	srv    *http.Server
	svc    *services
	obs    *observer
	failed chan error // the server stopped by itself
	// answers counts what the server answered.
	answers answerCounter
	// stopConsumer stops the consumer and the expirer, and waits for them.
	stopConsumer func()
}

// startInstance starts serving cfg's strategy on cfg.addr over b.
func startInstance(cfg serveConfig, b *backends, log *slog.Logger) (*instance, error) {
	authn, err := cfg.authenticator()
	if err != nil {
		return nil, err
	}
	obs, err := newObserver(cfg, b, log) // observe.go
	if err != nil {
		return nil, err
	}
	cfg.consumer.measure = obs.m.Persister
	if err := useProvider(cfg, authn, b, obs, log); err != nil {
		obs.close()
		return nil, err
	}
	svc, err := newServices(cfg, b, log)
	if err != nil {
		obs.close()
		return nil, err
	}
	obs.watch(svc)
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		obs.close()
		svc.close()
		return nil, err
	}
	inst := &instance{URL: "http://" + ln.Addr().String(), svc: svc, obs: obs, failed: make(chan error, 1)}
	evs, err := inst.runBackground(cfg, b, log) // events.go
	if err != nil {
		ln.Close()
		return nil, err
	}
	paymentSecret, _ := cfg.payments.secret() // validated
	api := &httpapi.Server{
		Vouchers:   svc.vouchers,
		Orders:     svc.orders,
		Auth:       authn,
		Limiter:    ratelimit.New(b.redis, b.prefix+"rate:"),
		UserRate:   cfg.rateUser,
		IPRate:     cfg.rateIP,
		TrustProxy: cfg.trustProxy,
		Ready:      svc.ready,
		Logger:     log,
		Admission:  svc.queue,
		Events:     evs,

		PaymentSecret: paymentSecret,
	}
	inst.srv = newHTTPServer(inst.obs.handler(inst.answers.wrap(api.Handler()), api.IsAdmin, cfg.openMetrics), log)
	log.Info("serving", "addr", ln.Addr().String(), "strategy", cfg.strategy)
	go func() {
		if err := inst.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			inst.failed <- err
		}
	}()
	return inst, nil
}

// newHTTPServer returns the server of h with serve's timeouts, which the
// metrics listener shares.
func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// Stop finishes in-flight requests (until ctx ends), then stops the
// consumer after its current batch and releases the instance's services.
func (inst *instance) Stop(ctx context.Context) error {
	err := inst.srv.Shutdown(ctx)
	inst.stopConsumer()
	inst.obs.close()
	inst.svc.close()
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
