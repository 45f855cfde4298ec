// Package eventbench is `flashsale bench --events`: a NATS JetStream
// consumer and a webhook receiver beside a sale, and the audit of what
// they received against MySQL (docs/events.md).
package eventbench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/store"
)

// Watch is the two consumers of one run: Start them before the sale,
// Finish after it.
type Watch struct {
	// Subject and Stream are the run's own: pass them to the instances
	// (--events-subject, --events-stream) before Start.
	Subject, Stream string
	nc              *nats.Conn
	js              jetstream.JetStream
	cc              jetstream.ConsumeContext
	srv             *http.Server
	nats, hook      *outbox.Audit
	target, admin   string
	hookID          string
	since           time.Time // events before Start are other runs'
}

// New names a run's subject and stream and connects to NATS at url.
func New(url string) (*Watch, error) {
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("eventbench: NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	u := strings.ToLower(rand.Text()[:8])
	return &Watch{Subject: "bench" + u, Stream: "BENCH" + strings.ToUpper(u), nc: nc, js: js, nats: outbox.NewAudit(), hook: outbox.NewAudit()}, nil
}

// Start registers a webhook receiver on target (an instance's base URL,
// admin the admin token) and consumes the stream the instances created.
func (w *Watch) Start(ctx context.Context, target, admin string) error {
	w.target, w.admin, w.since = target, admin, time.Now()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	w.srv = &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.receive(w.hook, body)
		rw.WriteHeader(http.StatusNoContent)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = w.srv.Serve(ln) }()
	var hook struct {
		ID string `json:"id"`
	}
	if err := w.call(ctx, "POST", "/api/webhooks", fmt.Sprintf(`{"url": "http://%s/hook"}`, ln.Addr()), &hook); err != nil {
		return err
	}
	w.hookID = hook.ID
	c, err := w.js.OrderedConsumer(ctx, w.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("eventbench: stream %s: %w", w.Stream, err)
	}
	w.cc, err = c.Consume(func(m jetstream.Msg) { w.receive(w.nats, m.Data()) }, ConsumeOpts...)
	return err
}

// ConsumeOpts are the pull options of the stream's consumer. With
// nats.go's defaults (500 messages a pull, heartbeats every 5 s) an
// ordered consumer of a stream filling at ~20,000 events/s stopped
// receiving for about 10 s (two missed heartbeats) in one run in four
// here, and with a 1 s heartbeat for about 2 s in three runs in eight;
// pulling 5,000 at a time with a 1 s heartbeat, none in eight
// (docs/benchmarks.md, "The relay to JetStream, again").
var ConsumeOpts = []jetstream.PullConsumeOpt{jetstream.PullMaxMessages(5000), jetstream.PullExpiry(2 * time.Second), jetstream.PullHeartbeat(time.Second)}

// receive audits one delivery, unless it is of an earlier run (a new
// NATS sink starts with every event the outbox keeps).
func (w *Watch) receive(a *outbox.Audit, body []byte) {
	at := time.Now()
	var e flashsale.Event
	if json.Unmarshal(body, &e) == nil && !e.OccurredAt.Before(w.since) {
		_ = a.Receive(body, at)
	}
}

// call sends an admin request to the target and decodes the answer.
func (w *Watch) call(ctx context.Context, method, path, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, w.target+path, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+w.admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("eventbench: %s %s: %w", method, path, err)
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("eventbench: %s %s: %s", method, path, res.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(res.Body).Decode(out)
}

// Report is the audit of one run.
type Report struct {
	// Orders are the voucher's orders in MySQL, Events the events they
	// and the voucher should have (order.placed and each order's closing
	// event; the voucher's) — all found in the outbox, else MissingInOutbox.
	Orders, Events, MissingInOutbox int
	// NATS and Webhook: what each consumer received.
	NATS, Webhook outbox.AuditReport
	// MissingNATS and MissingWebhook count the events a sink never
	// delivered within the wait.
	MissingNATS, MissingWebhook int
}

// Finish waits (up to wait) until both consumers have every event of the
// voucher's orders, audits them, and removes the webhook and the stream.
func (w *Watch) Finish(ctx context.Context, db *store.DB, voucherID int64, wait time.Duration) (Report, error) {
	defer w.close()
	want, r, err := expected(ctx, db, voucherID)
	if err != nil {
		return r, err
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if len(w.nats.Missing(want)) == 0 && len(w.hook.Missing(want)) == 0 {
			break
		}
	}
	r.MissingNATS, r.MissingWebhook = len(w.nats.Missing(want)), len(w.hook.Missing(want))
	r.NATS, r.Webhook = w.nats.Report(), w.hook.Report()
	return r, nil
}

// expected returns the voucher's events in the outbox and checks that
// every order of the voucher in MySQL has its events there.
func expected(ctx context.Context, db *store.DB, voucherID int64) ([]store.OutboxEvent, Report, error) {
	var r Report
	orders, err := db.OrdersOf(ctx, voucherID)
	if err != nil {
		return nil, r, err
	}
	var events []store.OutboxEvent
	byOrder := map[int64][]flashsale.EventType{}
	for after := int64(0); ; {
		page, err := db.EventsAfter(ctx, after, 5000)
		if err != nil || len(page) == 0 {
			if err != nil {
				return nil, r, err
			}
			break
		}
		for _, e := range page {
			if e.VoucherID == voucherID {
				events = append(events, e)
				byOrder[e.OrderID] = append(byOrder[e.OrderID], e.Type)
			}
		}
		after = page[len(page)-1].Pos
	}
	r.Orders, r.Events = len(orders), len(events)
	for _, o := range orders {
		want := []flashsale.EventType{flashsale.EventOrderPlaced}
		if o.Status == flashsale.StatusPending {
			continue // not in the system of record yet
		}
		switch o.Status {
		case flashsale.StatusPaid, flashsale.StatusCancelled, flashsale.StatusExpired:
			want = append(want, flashsale.EventType("order."+string(o.Status)))
		case flashsale.StatusFailed:
			want = []flashsale.EventType{flashsale.EventOrderFailed}
		}
		got := byOrder[o.ID]
		if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
			r.MissingInOutbox++
		}
	}
	return events, r, nil
}

// close removes the run's webhook and stream.
func (w *Watch) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if w.cc != nil {
		w.cc.Stop()
	}
	if w.hookID != "" {
		_ = w.call(ctx, "DELETE", "/api/webhooks/"+w.hookID, "", nil)
	}
	if w.srv != nil {
		_ = w.srv.Close()
	}
	_ = w.js.DeleteStream(ctx, w.Stream)
	w.nc.Close()
}

// String is the report's line under the bench's table.
func (r Report) String() string {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) + " ms"
	}
	return fmt.Sprintf("events: %d orders, %d events (%d orders missing some in the outbox); "+
		"NATS: %d received, %d missing, %d out of order, %d duplicates, commit→delivery p50 %s p99 %s; "+
		"webhook: %d received, %d missing, %d out of order, %d duplicates, p50 %s p99 %s",
		r.Orders, r.Events, r.MissingInOutbox,
		r.NATS.Received, r.MissingNATS, len(r.NATS.OutOfOrder), r.NATS.Duplicates, ms(r.NATS.P50), ms(r.NATS.P99),
		r.Webhook.Received, r.MissingWebhook, len(r.Webhook.OutOfOrder), r.Webhook.Duplicates, ms(r.Webhook.P50), ms(r.Webhook.P99))
}
