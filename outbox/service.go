package outbox

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// Pull limits: GET /api/events?limit=N takes 1 to MaxLimit, DefaultLimit
// when not given.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Service is what the API does with events: the pull of the outbox and
// the webhooks' registry. It validates what it is given (EInvalid).
type Service struct {
	DB *store.DB
	// Client sends redeliveries (nil: a client with a 10 s timeout).
	Client *http.Client
}

// Events returns up to limit events after cursor ("" for the oldest
// kept), oldest first, and the cursor of the next page: the last event's,
// or cursor again when there is none yet. A cursor is a position in the
// log, stable: it names the same place whatever is written later.
func (s *Service) Events(ctx context.Context, cursor string, limit int) ([]flashsale.Event, string, error) {
	after := int64(0)
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 0 {
			return nil, "", flashsale.Errorf(flashsale.EInvalid, "cursor %q is not one this API gave", cursor)
		}
		after = n
	}
	if limit < 1 || limit > MaxLimit {
		return nil, "", flashsale.Errorf(flashsale.EInvalid, "limit must be 1 to %d, got %d", MaxLimit, limit)
	}
	stored, err := s.DB.EventsAfter(ctx, after, limit)
	if err != nil {
		return nil, "", err
	}
	events := make([]flashsale.Event, len(stored))
	for i, e := range stored {
		events[i] = e.Event
		after = e.Pos
	}
	return events, strconv.FormatInt(after, 10), nil
}

// CreateWebhook registers an endpoint for the given event types (none:
// all) and returns it with its secret, shown this once.
func (s *Service) CreateWebhook(ctx context.Context, rawURL string, types []flashsale.EventType) (*flashsale.Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(rawURL) > 2048 {
		return nil, flashsale.Errorf(flashsale.EInvalid, "url must be an http or https URL of at most 2048 bytes, got %q", rawURL)
	}
	for _, t := range types {
		if !t.Valid() {
			return nil, flashsale.Errorf(flashsale.EInvalid, "unknown event type %q (known: %v)", t, flashsale.EventTypes())
		}
	}
	types = slices.Compact(slices.Sorted(slices.Values(types)))
	if types == nil {
		types = []flashsale.EventType{} // every type: shown as [], never null
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	w := &flashsale.Webhook{ID: int64(binary.BigEndian.Uint64(b[:8]) >> 12), URL: rawURL, Events: types,
		Secret: "whsec_" + base64.StdEncoding.EncodeToString(b[8:])}
	if err := s.DB.CreateWebhook(ctx, w); err != nil {
		return nil, err
	}
	return w, nil
}

// Webhooks returns every endpoint, without their secrets.
func (s *Service) Webhooks(ctx context.Context) ([]flashsale.Webhook, error) {
	hooks, err := s.DB.Webhooks(ctx)
	for i := range hooks {
		hooks[i].Secret = ""
	}
	return hooks, err
}

// DeleteWebhook deletes an endpoint, or returns ENotFound.
func (s *Service) DeleteWebhook(ctx context.Context, id int64) error {
	return s.DB.DeleteWebhook(ctx, id)
}

// DeadLetters returns up to limit (1 to MaxLimit) of the endpoint's
// dead letters, oldest event first; ENotFound for no such endpoint.
func (s *Service) DeadLetters(ctx context.Context, id int64, limit int) ([]flashsale.WebhookDeadLetter, error) {
	if limit < 1 || limit > MaxLimit {
		return nil, flashsale.Errorf(flashsale.EInvalid, "limit must be from 1 to %d, got %d", MaxLimit, limit)
	}
	if _, err := s.DB.FindWebhook(ctx, id); err != nil {
		return nil, err
	}
	dead, err := s.DB.DeadLetters(ctx, id, limit)
	if err != nil {
		return nil, err
	}
	out := make([]flashsale.WebhookDeadLetter, len(dead))
	for i, d := range dead {
		out[i] = flashsale.WebhookDeadLetter{EventID: flashsale.EventID(d.EventSequence), Event: d.Body, Attempts: d.Attempts, LastError: d.LastError, DeadAt: d.DeadAt}
	}
	return out, nil
}

// Redeliver sends the endpoint's dead letters again, oldest first, signed
// anew, and deletes each that it took; it returns how many went and how
// many are left.
func (s *Service) Redeliver(ctx context.Context, id int64) (sent, left int, err error) {
	w, err := s.DB.FindWebhook(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	client := s.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	sink := &Webhook{hook: *w, db: s.DB, client: client}
	dead, err := s.DB.DeadLetters(ctx, id, MaxLimit)
	if err != nil {
		return 0, 0, err
	}
	for _, d := range dead {
		if err := sink.post(ctx, flashsale.EventID(d.EventSequence), d.Body); err != nil {
			break
		}
		if err := s.DB.DeleteDeadLetter(ctx, id, d.EventSequence); err != nil {
			return sent, w.DeadLetters - sent, err
		}
		sent++
	}
	return sent, w.DeadLetters - sent, nil
}
