package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/flashsale/flashsale/eventbench"
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
	if f.retention <= 0 || f.subject == "" || f.stream == "" {
		return fmt.Errorf("--events-retention must be positive and --events-subject and --events-stream not empty")
	}
	return nil
}

// runBackground starts the instance's background work (runBackground of
// services.go) and its outbox relay, and returns the events' API service.
// On an error it releases the instance's observer and services.
func (inst *instance) runBackground(cfg serveConfig, b *backends, log *slog.Logger) (*outbox.Service, error) {
	watch, f := inst.obs.m.WatchOutbox(), cfg.events
	evs, stopEvents, err := outbox.Start(context.Background(), outbox.Config{DB: b.db, URL: b.dbURL, NATS: f.nats, Subject: f.subject, Stream: f.stream,
		Retention: f.retention, Logger: log, Delivered: watch.Delivered, Failed: watch.Failed,
		Also: func(ctx context.Context) { watch.Run(ctx, b.db, log) }})
	if err != nil {
		inst.obs.close()
		inst.svc.close()
		return nil, err
	}
	stopBackground := runBackground(inst.svc, cfg)
	inst.stopConsumer = func() { stopBackground(); stopEvents() }
	return evs, nil
}

// benchEvents is bench's --events: a NATS consumer and a webhook receiver
// beside each sale, and their audit (package eventbench).
type benchEvents struct {
	on   bool
	nats string
}

func (f *benchEvents) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.on, "events", false, "run a NATS JetStream consumer and a webhook receiver beside each sale and log their audit (docs/events.md); not with --parallel")
	fs.StringVar(&f.nats, "events-nats", "nats://127.0.0.1:4222", "with --events: the NATS server the instances relay to")
}

// startWatched starts the run's instances and, with --events, its
// consumers.
func (fl *fleets) startWatched(ctx context.Context, name string) (f *fleet, err error) {
	if fl.cfg.events.on && !fl.cfg.parallel {
		if fl.events, err = eventbench.New(fl.cfg.events.nats); err != nil {
			return nil, err
		}
	}
	if f, err = fl.start(ctx, name); err == nil && fl.events != nil {
		if err = fl.events.Start(ctx, f.urls[0], fl.admin); err != nil {
			_ = f.stop()
		}
	}
	return f, err
}

// auditEvents logs the audit of the run's events (--events).
func (fl *fleets) auditEvents(ctx context.Context, name string, voucherID int64, log *slog.Logger) {
	if fl.events != nil {
		rep, err := fl.events.Finish(context.WithoutCancel(ctx), fl.b.db, voucherID, time.Minute)
		log.Info("events audit: "+rep.String(), "err", err)
		fmt.Fprintf(os.Stderr, "%s events audit: %s (%v)\n", name, rep, err)
	}
}
