package outbox

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flashsale/flashsale/store"
)

// Config is what Start runs: a Relay of the database's outbox with the
// webhooks and, with NATS set, a NATS JetStream sink.
type Config struct {
	DB *store.DB
	// URL is DB's; on MySQL the relay opens a pool of its own there
	// (relayConns connections), so the orders' transactions, queued for
	// a hot voucher's row with every connection of DB's pool, cannot
	// starve it.
	URL string
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

// relayConns is the size of the relay's own pool: the sequencer, the
// sinks' loops and the pruning, each one statement at a time.
const relayConns = 4

// Start connects to NATS (if set; the stream created if missing), starts
// the relay of this process (its owner named by host, pid and a random
// part) and returns the API's service and what stops the relay.
func Start(ctx context.Context, c Config) (*Service, func(), error) {
	db, closeDB := c.DB, func() {}
	if c.URL != "" && c.DB.Dialect() == store.MySQL {
		sep := "?"
		if strings.Contains(c.URL, "?") {
			sep = "&"
		}
		own, err := store.Open(ctx, c.URL+sep+"max_open_conns="+strconv.Itoa(relayConns))
		if err != nil {
			return nil, nil, err
		}
		db, closeDB = own, func() { own.Close() }
	}
	host, _ := os.Hostname()
	relay := &Relay{DB: db, Owner: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), rand.Text()[:8]), Retention: c.Retention,
		Webhooks: true, Logger: c.Logger, Delivered: c.Delivered, Failed: c.Failed}
	closeNATS := func() {}
	if c.NATS != "" {
		nc, err := nats.Connect(c.NATS, nats.Name("flashsale"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true))
		if err != nil {
			closeDB()
			return nil, nil, fmt.Errorf("outbox: NATS at %s: %w", c.NATS, err)
		}
		sink, err := NewNATS(ctx, nc, c.Subject, c.Stream)
		if err != nil {
			nc.Close()
			closeDB()
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
	return &Service{DB: c.DB}, func() { cancel(); wg.Wait(); closeNATS(); closeDB() }, nil
}
