package outbox_test

import (
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readStream audits every message the stream holds, from the first, once
// it holds at least want.
func readStream(t *testing.T, url, stream string, want int, within time.Duration) *outbox.Audit {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(within)
	for {
		info, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if int(info.State.Msgs) >= want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream holds %d messages after %s, want %d", info.State.Msgs, within, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
	audit := outbox.NewAudit()
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			break
		}
		if err := audit.Receive(m.Data, m.Time); err != nil {
			t.Fatal(err)
		}
	}
	return audit
}

// faultRig is two relay processes on a database, relaying to a private
// NATS and to a webhook endpoint.
type faultRig struct {
	db     *store.DB
	nats   *testenv.NATSServer
	stream string
	procs  *relayProcs
	hook   *receiver
}

func newFaultRig(t *testing.T, dbURL string) *faultRig {
	t.Helper()
	db, err := store.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ns := testenv.StartNATS(t)
	nc, subject, stream := testenv.NATSAt(t, ns.URL())
	if _, err := outbox.NewNATS(t.Context(), nc, subject, stream); err != nil {
		t.Fatal(err)
	}
	hook := newReceiver(t, func() (int, string) { return http.StatusOK, "" })
	hook.register(&outbox.Service{DB: db})
	procs := &relayProcs{t: t, spec: relaySpec{DB: dbURL, NATS: ns.URL(), Subject: subject, Stream: stream, Webhooks: true}, procs: map[string]*exec.Cmd{}}
	procs.start()
	procs.start()
	procs.stopAtEnd()
	return &faultRig{db: db, nats: ns, stream: stream, procs: procs, hook: hook}
}

// check waits until the stream and the webhook endpoint hold every event
// of the outbox, and audits both: none missing, none out of order per
// order.
func (r *faultRig) check(t *testing.T) {
	t.Helper()
	want := allEvents(t, r.db)
	audit := readStream(t, r.nats.URL(), r.stream, len(want), 3*time.Minute)
	if m := audit.Missing(want); len(m) > 0 {
		t.Fatalf("%d of %d events missing, first %v", len(m), len(want), m[:min(5, len(m))])
	}
	rep := audit.Report()
	if len(rep.OutOfOrder) > 0 {
		t.Fatalf("%d events out of order: %v", len(rep.OutOfOrder), rep.OutOfOrder[:min(5, len(rep.OutOfOrder))])
	}
	t.Logf("%d events in the stream, %d duplicates", rep.Received, rep.Duplicates)
	waitDelivered(t, r.db, r.hook.audit, time.Minute)
}

// natsOutage is how long TestRelayNATSStoppedDuringSale keeps NATS down.
const natsOutage = 30 * time.Second

// TestRelayNATSStoppedDuringSale: a private nats-server is stopped for 30
// s while orders are placed, paid and cancelled; the relays retry, and
// once it is back every event reaches the stream, in order per order.
func TestRelayNATSStoppedDuringSale(t *testing.T) {
	r := newFaultRig(t, testenv.MySQLURL(t))
	var stopped time.Time
	sellAndSettle(t, r.db, 3000, 4, func() {
		r.nats.Stop()
		stopped = time.Now()
	})
	// The webhook endpoint is not held up by the NATS sink's outage.
	waitDelivered(t, r.db, r.hook.audit, natsOutage/2)
	if time.Since(stopped) >= natsOutage {
		t.Fatalf("the webhook's events took %s, past the NATS outage", time.Since(stopped))
	}
	time.Sleep(time.Until(stopped.Add(natsOutage)))
	r.nats.Start()
	r.check(t)
}

// TestRelayMySQLRestarted: the private MariaDB the relays read is
// restarted between two halves of a sale; the relays reconnect and every
// event of both halves reaches the stream, in order per order.
func TestRelayMySQLRestarted(t *testing.T) {
	m := testenv.StartMariaDB(t)
	r := newFaultRig(t, m.URL())
	sellAndSettle(t, r.db, 2000, 9, func() {
		time.Sleep(200 * time.Millisecond) // the relays are at work
		m.Stop()
		time.Sleep(3 * time.Second)
		m.Start()
	})
	r.check(t)
}
