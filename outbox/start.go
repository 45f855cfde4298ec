package outbox

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flashsale/flashsale/store"
)

// Config is what Start runs: a Relay of the database's outbox with the
// webhooks and, with NATS set, a NATS JetStream sink.
type Config struct {
	DB *store.DB
	// NATS is the server's URL ("": no NATS sink); Subject and Stream
	// its subjects' prefix and its stream.
	NATS, Subject, Stream string
	Retention             time.Duration
	Logger                *slog.Logger
	// Delivered and Failed are the Relay's hooks (metrics).
	Delivered func(sink string, events []store.OutboxEvent)
	Failed    func(sink string, err error)
	// Also runs beside the relay until it stops (the metrics' sampler).
	Also func(ctx context.Context)
}

// Start connects to NATS (if set; the stream created if missing), starts
// the relay of this process (its owner named by host, pid and a random
// part) and returns the API's service and what stops the relay.
func Start(ctx context.Context, c Config) (*Service, func(), error) {
	host, _ := os.Hostname()
	relay := &Relay{DB: c.DB, Owner: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:8]), Retention: c.Retention,
		Webhooks: true, Logger: c.Logger, Delivered: c.Delivered, Failed: c.Failed}
	closeNATS := func() {}
	if c.NATS != "" {
		nc, err := nats.Connect(c.NATS, nats.Name("flashsale"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
		if err != nil {
			return nil, nil, fmt.Errorf("outbox: NATS at %s: %w", c.NATS, err)
		}
		sink, err := NewNATS(ctx, nc, c.Subject, c.Stream)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		relay.Sinks, closeNATS = append(relay.Sinks, sink), nc.Close
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { relay.Run(rctx) })
	if c.Also != nil {
		wg.Go(func() { c.Also(rctx) })
	}
	return &Service{DB: c.DB}, func() { cancel(); wg.Wait(); closeNATS() }, nil
}
