package main

import (
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestServeRelaysEvents: serve with --events-nats writes each order's
// events and relays them to its JetStream stream (created by serve), and
// GET /api/events shows them too; on SQLite (embedded) and on MariaDB,
// where the relay has a pool of its own.
func TestServeRelaysEvents(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { serveRelaysEvents(t) })
	t.Run("mysql", func(t *testing.T) { serveRelaysEvents(t, "--db", testenv.MySQLURL(t)) })
}

func serveRelaysEvents(t *testing.T, args ...string) {
	nc, subject, stream := testenv.NATS(t)
	url, stop := startServe(t, append(args, "--events-nats", testenv.NATSURL(), "--events-subject", subject, "--events-stream", stream)...)
	var v struct {
		ID string `json:"id"`
	}
	if code := call(t, "POST", url+"/api/vouchers", serveAdmin, voucherBody(2), &v); code != 201 {
		t.Fatalf("create voucher: %d", code)
	}
	for u := range 3 {
		call(t, "POST", url+"/api/vouchers/"+v.ID+"/orders", userToken(t, int64(u+1)), "", nil)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var types []flashsale.EventType
	deadline := time.Now().Add(time.Minute)
	for len(types) < 3 && time.Now().Before(deadline) {
		types = types[:0]
		s, err := js.Stream(t.Context(), stream)
		if err == nil {
			for seq := uint64(1); ; seq++ {
				raw, err := s.GetMsg(t.Context(), seq)
				if err != nil {
					break
				}
				var e flashsale.Event
				if err := json.Unmarshal(raw.Data, &e); err != nil {
					t.Fatal(err)
				}
				if raw.Subject != subject+"."+string(e.Type) || raw.Header.Get("Nats-Msg-Id") != e.ID {
					t.Errorf("message %d: subject %s, id %s, event %+v", seq, raw.Subject, raw.Header.Get("Nats-Msg-Id"), e)
				}
				types = append(types, e.Type)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := []flashsale.EventType{flashsale.EventOrderPlaced, flashsale.EventOrderPlaced, flashsale.EventVoucherSoldOut}
	if len(types) != 3 || types[0] != want[0] || types[1] != want[1] || types[2] != want[2] {
		t.Fatalf("stream holds %v, want %v", types, want)
	}
	var page struct {
		Events []flashsale.Event `json:"events"`
		Next   string            `json:"next"`
	}
	if code := call(t, "GET", url+"/api/events", serveAdmin, "", &page); code != 200 || len(page.Events) != 3 {
		t.Fatalf("GET /api/events: %d, %+v", code, page)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestBenchEvents: bench --events audits a NATS consumer and a webhook
// receiver beside the sale: every order's events, none missing, none out
// of order (the audit's line goes to the process's standard error).
func TestBenchEvents(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	read := make(chan string)
	go func() { b, _ := io.ReadAll(r); read <- string(b) }()
	func() {
		defer func() { os.Stderr = stderr; w.Close() }()
		benchOnServers(t, "--strategy", "batch", "--events", "--events-nats", testenv.NATSURL(), "--users", "60", "--stock", "20", "--requests", "120")
	}()
	out := <-read
	line := ""
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "batch events audit:") {
			line = l
		}
	}
	want := regexp.MustCompile(`events: 20 orders, 2[0-9] events \(0 orders missing some in the outbox\); NATS: 2[0-9] received, 0 missing, 0 out of order, \d+ duplicates, .*webhook: 2[0-9] received, 0 missing, 0 out of order`)
	if !want.MatchString(line) {
		t.Fatalf("audit line %q does not match %s\nstderr:\n%s", line, want, out)
	}
}
