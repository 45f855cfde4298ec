package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flashsale/flashsale/metrics"
	"github.com/flashsale/flashsale/outbox"
)

// eventFlags are serve's settings of the event outbox (docs/events.md).
type eventFlags struct {
	nats, subject, stream string
	retention             time.Duration
}

func (f *eventFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.nats, "events-nats", "", "relay order and voucher events to this NATS server's JetStream (nats://host:port; none: the outbox is still written, pulled and sent to webhooks)")
	fs.StringVar(&f.subject, "events-subject", "flashsale", "events go to <subject>.<type>, e.g. flashsale.order.paid")
	fs.StringVar(&f.stream, "events-stream", "FLASHSALE", "the JetStream stream of the events, created if missing")
	fs.DurationVar(&f.retention, "events-retention", 7*24*time.Hour, "how long delivered events are kept (undelivered ones always are)")
}

func (f *eventFlags) validate() error {
	if f.retention <= 0 {
		return fmt.Errorf("--events-retention must be positive, got %s", f.retention)
	}
	if f.subject == "" || f.stream == "" {
		return fmt.Errorf("--events-subject and --events-stream must not be empty")
	}
	return nil
}

// startEvents starts the outbox relay of this instance (the sequencer,
// pruning, webhooks and, with --events-nats, NATS) and returns the API's
// service and what stops the relay.
func startEvents(ctx context.Context, f eventFlags, b *backends, m *metrics.Metrics, log *slog.Logger) (*outbox.Service, func(), error) {
	watch := m.WatchOutbox()
	relay := &outbox.Relay{DB: b.db, Owner: eventsOwner(), Retention: f.retention, Webhooks: true, Logger: log,
		Delivered: watch.Delivered, Failed: watch.Failed}
	var closers []func()
	if f.nats != "" {
		nc, err := nats.Connect(f.nats, nats.Name("flashsale"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
		if err != nil {
			return nil, nil, fmt.Errorf("events: NATS at %s: %w", f.nats, err)
		}
		closers = append(closers, nc.Close)
		sink, err := outbox.NewNATS(ctx, nc, f.subject, f.stream)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		relay.Sinks = append(relay.Sinks, sink)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { relay.Run(rctx) })
	wg.Go(func() { watch.Run(rctx, b.db, log) })
	return &outbox.Service{DB: b.db}, func() {
		cancel()
		wg.Wait()
		for _, c := range closers {
			c()
		}
	}, nil
}

// eventsOwner names this process in the outbox's leases.
func eventsOwner() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:8])
}

// runBackground starts the instance's background work (runBackground of
// services.go) and its outbox relay, and returns the events' API service.
// On an error it releases the instance's observer and services.
func (inst *instance) runBackground(cfg serveConfig, b *backends, log *slog.Logger) (*outbox.Service, error) {
	evs, stopEvents, err := startEvents(context.Background(), cfg.events, b, inst.obs.m, log)
	if err != nil {
		inst.obs.close()
		inst.svc.close()
		return nil, err
	}
	stopBackground := runBackground(inst.svc, cfg)
	inst.stopConsumer = func() { stopBackground(); stopEvents() }
	return evs, nil
}
