package outbox_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/outbox"
	"github.com/flashsale/flashsale/store"
)

// TestSignStandardWebhooksVector checks the signing against the Standard
// Webhooks spec's published test vector.
func TestSignStandardWebhooksVector(t *testing.T) {
	sig, err := outbox.Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; err != nil || sig != want {
		t.Fatalf("Sign = %q, %v; want %q", sig, err, want)
	}
	if _, err := outbox.Sign("whsec_not base64!", "id", time.Now(), nil); err == nil {
		t.Error("Sign with a bad secret: no error")
	}
}

// receiver is a shop's webhook endpoint: it checks every delivery's
// signature and audits the events; answer decides each answer's status
// (and Retry-After).
type receiver struct {
	t      *testing.T
	secret atomic.Value // string, set once the endpoint is registered
	audit  *outbox.Audit
	answer func() (int, string)
	posts  atomic.Int64
	srv    *httptest.Server
}

func newReceiver(t *testing.T, answer func() (int, string)) *receiver {
	rc := &receiver{t: t, audit: outbox.NewAudit(), answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	rc.posts.Add(1)
	body, _ := io.ReadAll(r.Body)
	secret, _ := rc.secret.Load().(string)
	ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	want, serr := outbox.Sign(secret, r.Header.Get("webhook-id"), time.Unix(ts, 0), body)
	if err != nil || serr != nil || r.Header.Get("webhook-signature") != want {
		rc.t.Errorf("delivery %s: signature %q, want %q (%v %v)", r.Header.Get("webhook-id"), r.Header.Get("webhook-signature"), want, err, serr)
	}
	status, retryAfter := rc.answer()
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	if status/100 == 2 {
		if err := rc.audit.Receive(body, time.Now()); err != nil {
			rc.t.Error(err)
		}
	}
	w.WriteHeader(status)
}

// register registers the receiver for types and returns its id.
func (rc *receiver) register(svc *outbox.Service, types ...flashsale.EventType) int64 {
	h, err := svc.CreateWebhook(rc.t.Context(), rc.srv.URL+"/hook", types)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.secret.Store(h.Secret)
	return h.ID
}

// runWebhookRelay runs an in-process relay of the webhooks until the test ends.
func runWebhookRelay(t *testing.T, db *store.DB, retryFor time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	r := &outbox.Relay{DB: db, Owner: "test", Webhooks: true, WebhookRetryFor: retryFor, Lease: 2 * time.Second}
	wg.Go(func() { r.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// webhookOutage is how long the failing endpoint of
// TestWebhookFailingThenOK answers 500: the minute.
const webhookOutage = time.Minute

// TestWebhookFailingThenOK: one endpoint answers 500 for a minute (and
// Retry-After on some answers), then 200; another answers 200 all along
// and gets every event meanwhile, not held up by the first. Both end with
// every event, in order per order, signed. Two relay processes deliver.
func TestWebhookFailingThenOK(t *testing.T) {
	url := testenv.MySQLURL(t)
	db := openStoreAt(t, url)
	svc := &outbox.Service{DB: db}
	start := time.Now()
	var calls atomic.Int64
	failing := newReceiver(t, func() (int, string) {
		if time.Since(start) < webhookOutage {
			if calls.Add(1)%2 == 0 {
				return http.StatusServiceUnavailable, "1"
			}
			return http.StatusInternalServerError, ""
		}
		return http.StatusOK, ""
	})
	healthy := newReceiver(t, func() (int, string) { return http.StatusNoContent, "" })
	failingID := failing.register(svc)
	healthy.register(svc)
	procs := &relayProcs{t: t, spec: relaySpec{DB: url, Webhooks: true}, procs: map[string]*exec.Cmd{}}
	procs.start()
	procs.start()
	procs.stopAtEnd()
	sellAndSettle(t, db, 300, -1, func() {})
	waitDelivered(t, db, healthy.audit, 30*time.Second)
	if time.Since(start) < webhookOutage/2 && failing.audit.Report().Received > 0 {
		t.Errorf("the failing endpoint took events during its outage")
	}
	hook, err := db.FindWebhook(t.Context(), failingID)
	if err != nil || (time.Since(start) < webhookOutage && hook.Attempts == 0) {
		t.Errorf("failing endpoint's state: %+v, %v; want its attempts shown", hook, err)
	}
	waitDelivered(t, db, failing.audit, webhookOutage+2*time.Minute)
	t.Logf("the failing endpoint was tried %d times", failing.posts.Load())
}

// TestWebhookGoneAndDeadLetters: an endpoint answering 410 is disabled; one
// that keeps failing past the retry period dead-letters each event, which
// the admin then redelivers once it works.
func TestWebhookGoneAndDeadLetters(t *testing.T) {
	db := openStore(t)
	svc := &outbox.Service{DB: db}
	gone := newReceiver(t, func() (int, string) { return http.StatusGone, "" })
	var broken atomic.Bool
	broken.Store(true)
	dead := newReceiver(t, func() (int, string) {
		if broken.Load() {
			return http.StatusInternalServerError, ""
		}
		return http.StatusOK, ""
	})
	goneID := gone.register(svc)
	deadID := dead.register(svc, flashsale.EventVoucherSoldOut, flashsale.EventOrderPlaced)
	runWebhookRelay(t, db, 2*time.Second)
	sellAndSettle(t, db, 20, -1, func() {})
	deadline := time.Now().Add(time.Minute)
	for {
		g, err1 := db.FindWebhook(t.Context(), goneID)
		d, err2 := db.FindWebhook(t.Context(), deadID)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if g.Disabled && d.DeadLetters == 21 { // 20 placed, 1 sold out
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gone: %+v; dead: %+v", g, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if gone.posts.Load() != 1 {
		t.Errorf("the gone endpoint got %d posts, want 1", gone.posts.Load())
	}
	letters, err := svc.DeadLetters(t.Context(), deadID, outbox.MaxLimit)
	if err != nil || len(letters) != 21 || letters[0].Attempts < 1 || letters[0].LastError == "" || !json.Valid(letters[0].Event) ||
		!strings.Contains(string(letters[0].Event), `"id":"`+letters[0].EventID+`"`) {
		t.Fatalf("DeadLetters = %d letters, first %+v, %v; want 21 with what was sent and why it failed", len(letters), letters[0], err)
	}
	broken.Store(false)
	sent, left, err := svc.Redeliver(t.Context(), deadID)
	if err != nil || sent != 21 || left != 0 {
		t.Fatalf("Redeliver = %d, %d, %v; want 21, 0", sent, left, err)
	}
	if r := dead.audit.Report(); r.Received != 21 || len(r.OutOfOrder) != 0 {
		t.Fatalf("after redelivery: %+v", r)
	}
	if letters, err := svc.DeadLetters(t.Context(), deadID, 10); err != nil || len(letters) != 0 {
		t.Fatalf("DeadLetters after redelivery = %+v, %v; want none", letters, err)
	}
	if _, err := svc.DeadLetters(t.Context(), 12345, 10); flashsale.ErrorCode(err) != flashsale.ENotFound {
		t.Fatalf("DeadLetters of no endpoint: %v; want not_found", err)
	}
	if _, _, err := svc.Redeliver(t.Context(), 12345); flashsale.ErrorCode(err) != flashsale.ENotFound {
		t.Errorf("Redeliver of no webhook = %v, want not found", err)
	}
}

// openStore opens a new MySQL database for the test.
func openStore(t *testing.T) *store.DB {
	t.Helper()
	return openStoreAt(t, testenv.MySQLURL(t))
}

// openStoreAt opens the database at url until the test ends.
func openStoreAt(t *testing.T, url string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
