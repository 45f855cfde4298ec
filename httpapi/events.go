package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/outbox"
)

// Events is the outbox's pull and the webhooks' registry (admin only;
// docs/events.md). *outbox.Service implements it; it answers EInvalid for
// bad input, having changed nothing.
type Events interface {
	Events(ctx context.Context, cursor string, limit int) ([]flashsale.Event, string, error)
	CreateWebhook(ctx context.Context, url string, types []flashsale.EventType) (*flashsale.Webhook, error)
	Webhooks(ctx context.Context) ([]flashsale.Webhook, error)
	DeleteWebhook(ctx context.Context, id int64) error
	Redeliver(ctx context.Context, id int64) (sent, left int, err error)
	DeadLetters(ctx context.Context, id int64, limit int) ([]flashsale.WebhookDeadLetter, error)
}

var _ Events = (*outbox.Service)(nil)

// errNoEvents answers the event routes of a server without them.
var errNoEvents = flashsale.Errorf(flashsale.EUnavailable, "this server has no event outbox")

// eventsAdmin checks the admin token and that the server has events.
func (s *Server) eventsAdmin(w http.ResponseWriter, r *http.Request) bool {
	err := s.admin(r)
	if err == nil && s.Events == nil {
		err = errNoEvents
	}
	if err != nil {
		s.fail(w, r, err)
		return false
	}
	return true
}

// listEvents is GET /api/events?after=<cursor>&limit=N.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	if !s.eventsAdmin(w, r) {
		return
	}
	limit, err := queryLimit(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	events, next, err := s.Events.Events(r.Context(), r.URL.Query().Get("after"), limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": events, "next": next})
}

// queryLimit reads the limit query parameter of a page of events (none:
// outbox.DefaultLimit); its range is checked by the service.
func queryLimit(r *http.Request) (int, error) {
	l := r.URL.Query().Get("limit")
	if l == "" {
		return outbox.DefaultLimit, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil {
		return 0, flashsale.Errorf(flashsale.EInvalid, "limit must be a whole number from 1 to %d, got %q", outbox.MaxLimit, l)
	}
	return n, nil
}

// webhookID checks the admin token and reads the endpoint's id from the
// path; false when it answered the request with the error.
func (s *Server) webhookID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	if !s.eventsAdmin(w, r) {
		return 0, false
	}
	id, err := pathID(r, "id")
	if err != nil {
		s.fail(w, r, err)
		return 0, false
	}
	return id, true
}

// listDeadLetters is GET /api/webhooks/{id}/dead-letters: the events the
// endpoint never took, oldest first, with what was sent and why it failed.
func (s *Server) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	id, ok := s.webhookID(w, r)
	if !ok {
		return
	}
	limit, err := queryLimit(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	dead, err := s.Events.DeadLetters(r.Context(), id, limit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead_letters": dead})
}

// createWebhookRequest is the body of POST /api/webhooks.
type createWebhookRequest struct {
	URL    string                `json:"url"`
	Events []flashsale.EventType `json:"events"`
}

// createWebhook is POST /api/webhooks.
func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	if !s.eventsAdmin(w, r) {
		return
	}
	var req createWebhookRequest
	if err := decodeJSON(w, r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	hook, err := s.Events.CreateWebhook(r.Context(), req.URL, req.Events)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, hook)
}

// listWebhooks is GET /api/webhooks.
func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	if !s.eventsAdmin(w, r) {
		return
	}
	hooks, err := s.Events.Webhooks(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": hooks})
}

// deleteWebhook is DELETE /api/webhooks/{id}.
func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	id, ok := s.webhookID(w, r)
	if !ok {
		return
	}
	if err := s.Events.DeleteWebhook(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// redeliverWebhook is POST /api/webhooks/{id}/redeliver: the endpoint's
// dead letters sent again.
func (s *Server) redeliverWebhook(w http.ResponseWriter, r *http.Request) {
	id, ok := s.webhookID(w, r)
	if !ok {
		return
	}
	sent, left, err := s.Events.Redeliver(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"redelivered": sent, "dead_letters": left})
}
