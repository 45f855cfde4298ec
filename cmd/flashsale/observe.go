package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/dashboard"
	"github.com/flashsale/flashsale/httpapi"
	"github.com/flashsale/flashsale/metrics"
)

// observer is what serve adds to watch a sale: the Prometheus metrics, the
// sampler of the vouchers' figures, the dashboard, and the --metrics-addr
// listener (/metrics and /debug/pprof) when one is asked for.
type observer struct {
	m       *metrics.Metrics
	sampler *metrics.Sampler
	stop    context.CancelFunc
	done    chan struct{}
	srv     *http.Server // --metrics-addr, or nil
	addr    string       // where srv listens
	queues  dashboard.Queues
}

// newObserver starts the sampler and, with cfg.metricsAddr, the metrics
// listener.
func newObserver(cfg serveConfig, b *backends, log *slog.Logger) (*observer, error) {
	m := metrics.New(cfg.strategy)
	m.WatchIDs(b.ids)
	sampler := metrics.NewSampler(metrics.SamplerConfig{DB: b.db, Redis: b.redis, Prefix: b.prefix, Live: m.Live(), Logger: log})
	m.Watch(sampler)
	o := &observer{m: m, sampler: sampler, done: make(chan struct{})}
	if cfg.metricsAddr != "" {
		var err error
		if o.srv, o.addr, err = listenMetrics(cfg.metricsAddr, m, cfg.pprof, log); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	o.stop = cancel
	go func() { defer close(o.done); sampler.Run(ctx) }()
	return o, nil
}

// watch counts the services' orders, payments and cancels, the expirer's
// lag and returns, the consumer's work and the lock client's.
func (o *observer) watch(svc *services) {
	svc.orders = o.m.Orders(svc.orders)
	svc.observeLag = o.m.ObserveExpiryLag
	o.m.WatchLifecycle(svc.life)
	if svc.consumer != nil {
		o.m.WatchConsumer(svc.consumer)
	}
	if svc.locks != nil {
		o.m.WatchLocks(svc.locks)
	}
	if svc.queue != nil {
		o.queues = svc.queue // the dashboard's waiting rooms
		ctx, cancel := context.WithCancel(context.Background())
		stop := o.stop
		o.stop = func() { cancel(); stop() }
		o.m.WatchQueue(ctx, svc.queue, nil)
	}
}

// dashboardPath is the dashboard's page, where GET / leads.
const dashboardPath = "/dashboard"

// handler mounts api with the dashboard (GET / redirects to it) and, with
// --public-metrics, /metrics, all counted by the metrics middleware.
func (o *observer) handler(api http.Handler, isAdmin func(*http.Request) bool, openMetrics bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", api)
	mux.Handle("GET /{$}", http.RedirectHandler(dashboardPath, http.StatusFound))
	d := &dashboard.Dashboard{Sampler: o.sampler, Live: o.m.Live(), IsAdmin: isAdmin, Queues: o.queues}
	d.Register(mux)
	if openMetrics {
		mux.Handle(metrics.Route, o.m.Handler())
	}
	return o.m.Middleware(httpapi.NoSniff(mux))
}

// close stops the sampler and the metrics listener.
func (o *observer) close() {
	o.stop()
	<-o.done
	stopMetrics(o.srv)
}

// listenMetrics serves m's /metrics and, with withPprof, /debug/pprof on
// addr (the --metrics-addr of serve and consume), with serve's timeouts,
// and returns the server and the address it listens on.
func listenMetrics(addr string, m *metrics.Metrics, withPprof bool, log *slog.Logger) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(metrics.Route, m.Handler())
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := newHTTPServer(mux, log)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "pprof", withPprof)
	return srv, ln.Addr().String(), nil
}

// stopMetrics shuts down a listenMetrics server, if srv is not nil.
func stopMetrics(srv *http.Server) {
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// persister returns what the consumer persists through: the database,
// measured when serve watches it.
func (f *consumerFlags) persister(b *backends) consume.Persister {
	if f.measure != nil {
		return f.measure(b.db)
	}
	return b.db
}
