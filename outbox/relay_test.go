package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/eventbench"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// relayEnv carries a relay process's settings (relaySpec as JSON): the
// test binary started with it runs a relay instead of the tests.
const relayEnv = "FLASHSALE_TEST_RELAY"

type relaySpec struct {
	DB, NATS, Subject, Stream, Owner string
	// Webhooks: the process relays the registered webhooks too; NATS
	// "": no NATS sink.
	Webhooks bool
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(relayEnv); spec != "" {
		os.Exit(runRelay(spec))
	}
	os.Exit(m.Run())
}

// runRelay is a relay process: it relays to NATS and the webhooks, as
// its spec says, until SIGTERM.
func runRelay(specJSON string) int {
	var spec relaySpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db, err := store.Open(ctx, spec.DB)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	r := &outbox.Relay{DB: db, Owner: spec.Owner, Lease: time.Second, Batch: 200, Webhooks: spec.Webhooks}
	if spec.NATS != "" {
		nc, err := nats.Connect(spec.NATS, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer nc.Close()
		sink, err := outbox.NewNATS(ctx, nc, spec.Subject, spec.Stream)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r.Sinks = []outbox.Sink{sink}
	}
	r.Run(ctx)
	return 0
}

// relayProcs runs relay processes of one sink.
type relayProcs struct {
	t     *testing.T
	spec  relaySpec
	procs map[string]*exec.Cmd
	n     int
}

// start starts one more relay process and returns its owner name.
func (p *relayProcs) start() string {
	p.n++
	spec := p.spec
	spec.Owner = fmt.Sprintf("relay-%d", p.n)
	b, _ := json.Marshal(spec)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), relayEnv+"="+string(b))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.procs[spec.Owner] = cmd
	return spec.Owner
}

// stopAtEnd has every process stopped (SIGTERM) when the test ends.
func (p *relayProcs) stopAtEnd() {
	p.t.Cleanup(func() {
		for owner := range p.procs {
			p.kill(owner, syscall.SIGTERM)
		}
	})
}

// kill sends sig to the owner's process and waits for it.
func (p *relayProcs) kill(owner string, sig syscall.Signal) {
	cmd := p.procs[owner]
	if cmd == nil {
		p.t.Fatalf("no relay process %q", owner)
	}
	_ = cmd.Process.Signal(sig)
	_ = cmd.Wait()
	delete(p.procs, owner)
}

// sellAndSettle persists orders of voucher 1 in batches, as the async
// consumer does, then pays every third and cancels every fifth; after
// batch afterBatch it calls mid.
func sellAndSettle(t *testing.T, db *store.DB, orders, afterBatch int, mid func()) {
	t.Helper()
	ctx := t.Context()
	v := &flashsale.Voucher{ID: 1, Title: "v", Stock: orders, PayValue: 100, PaymentWindowSeconds: 3600,
		BeginTime: time.Now().Add(-time.Hour), EndTime: time.Now().Add(time.Hour)}
	if err := db.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	payBy := time.Now().Add(time.Hour)
	for b := 0; b*100 < orders; b++ {
		batch := make([]flashsale.Order, 0, 100)
		for u := b * 100; u < min((b+1)*100, orders); u++ {
			batch = append(batch, flashsale.Order{ID: int64(1_000_000 + u), VoucherID: 1, UserID: int64(u + 1), PayBy: payBy})
		}
		if _, err := db.PersistOrders(ctx, batch); err != nil {
			t.Fatal(err)
		}
		for _, o := range batch {
			var err error
			switch u := o.UserID; {
			case u%3 == 0:
				_, _, err = db.PayOrder(ctx, flashsale.Payment{ID: fmt.Sprint("p", o.ID), OrderID: o.ID, Amount: 100}, time.Now())
			case u%5 == 0:
				_, _, err = db.CancelOrder(ctx, o.ID, u, time.Now())
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if b == afterBatch {
			mid()
		}
	}
}

// consume audits every message of the stream, from the first.
func consume(t testing.TB, nc *nats.Conn, stream string) *outbox.Audit {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.OrderedConsumer(t.Context(), stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	audit := outbox.NewAudit()
	cc, err := c.Consume(func(m jetstream.Msg) {
		if err := audit.Receive(m.Data(), time.Now()); err != nil {
			t.Error(err)
		}
	}, eventbench.ConsumeOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return audit
}

// allEvents sequences what is left and returns every event of the outbox.
func allEvents(t *testing.T, db *store.DB) []store.OutboxEvent {
	t.Helper()
	for {
		n, err := db.SequenceEvents(t.Context(), 1000)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	events, err := db.EventsAfter(t.Context(), 0, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

// waitDelivered waits until the audit received every event of the outbox,
// and checks their order.
func waitDelivered(t *testing.T, db *store.DB, audit *outbox.Audit, within time.Duration) outbox.AuditReport {
	t.Helper()
	want := allEvents(t, db)
	deadline := time.Now().Add(within)
	for len(audit.Missing(want)) > 0 {
		if time.Now().After(deadline) {
			m := audit.Missing(want)
			t.Fatalf("%d of %d events never delivered, first %v", len(m), len(want), m[:min(len(m), 5)])
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := audit.Report()
	if len(r.OutOfOrder) > 0 {
		t.Fatalf("%d events out of order per order: %s", len(r.OutOfOrder), strings.Join(r.OutOfOrder[:min(5, len(r.OutOfOrder))], "; "))
	}
	t.Logf("%d events delivered, %d duplicates, latency p50 %s p99 %s", r.Received, r.Duplicates, r.P50, r.P99)
	return r
}

// TestRelayProcessesSIGKILLedMidBatch: three relay processes share one
// NATS sink and a webhook endpoint while orders are placed, paid and
// cancelled; the one holding the NATS cursor is SIGKILLed while it
// relays, and another started. Every event reaches the stream and the
// endpoint, none of an order out of order, and the stream's duplicates
// are few (JetStream drops republishes by Nats-Msg-Id).
func TestRelayProcessesSIGKILLedMidBatch(t *testing.T) {
	url := testenv.MySQLURL(t)
	db, sink, audit := natsRig(t, url)
	hook := newReceiver(t, func() (int, string) { return http.StatusOK, "" })
	hook.register(&outbox.Service{DB: db})
	subject, stream := sink.Subject(), sink.Stream()
	procs := &relayProcs{t: t, spec: relaySpec{DB: url, NATS: testenv.NATSURL(), Subject: subject, Stream: stream, Webhooks: true}, procs: map[string]*exec.Cmd{}}
	for range 3 {
		procs.start()
	}
	procs.stopAtEnd()
	killed := 0
	sellAndSettle(t, db, 3000, 14, func() {
		// Kill whoever relays now, while events flow.
		owner, err := db.CursorOwner(t.Context(), sink.Name())
		if err != nil || procs.procs[owner] == nil {
			t.Fatalf("cursor owner %q (%v) is not a relay process", owner, err)
		}
		procs.kill(owner, syscall.SIGKILL)
		killed++
		procs.start()
	})
	r := waitDelivered(t, db, audit, 2*time.Minute)
	if killed != 1 || r.Duplicates > 200*killed {
		t.Errorf("%d duplicates after %d kills, want at most one batch's (200) per kill", r.Duplicates, killed)
	}
	waitDelivered(t, db, hook.audit, 2*time.Minute) // the endpoint's duplicates logged: at least once
}

// natsRig opens the database at url, and a NATS sink of a stream of the
// test's own, its messages audited from the first.
func natsRig(t testing.TB, url string) (*store.DB, *outbox.NATS, *outbox.Audit) {
	t.Helper()
	db, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	nc, subject, stream := testenv.NATS(t)
	sink, err := outbox.NewNATS(context.Background(), nc, subject, stream)
	if err != nil {
		t.Fatal(err)
	}
	return db, sink, consume(t, nc, stream)
}
