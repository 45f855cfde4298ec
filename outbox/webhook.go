package outbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

// Sign returns the Standard Webhooks signature of a delivery:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)),
// the key being the secret's base64 after "whsec_".
func Sign(secret, id string, timestamp time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return "", fmt.Errorf("outbox: webhook secret: %w", err)
	}
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%d.", id, timestamp.Unix())
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// Webhook is the sink of one endpoint. Events go one at a time, in order
// (which keeps each order's in order); any 2xx is success, 410 disables
// the endpoint, anything else is retried with backoff, honouring
// Retry-After, until the event is RetryFor old (from its occurred_at):
// then it is
// dead-lettered (kept with its body until the admin redelivers it) and
// the next one goes. Each endpoint has its own cursor, so a slow one holds
// up only itself.
type Webhook struct {
	hook     flashsale.Webhook
	db       *store.DB
	client   *http.Client
	retryFor time.Duration
	// failing is the head event's first failure and attempts.
	failingID   string
	failingFrom time.Time
	attempts    int
	disabled    bool
}

// errDisabled stops the delivery of a disabled endpoint.
var errDisabled = errors.New("outbox: webhook disabled (410 Gone)")

// RetryAfterError is a failed delivery the endpoint asked to retry after
// a while.
type RetryAfterError struct {
	Err   error
	After time.Duration
}

func (e *RetryAfterError) Error() string { return e.Err.Error() }
func (e *RetryAfterError) Unwrap() error { return e.Err }

// Name implements Sink.
func (s *Webhook) Name() string { return store.WebhookCursor(s.hook.ID) }

// Start implements Sink: the cursor is created with the endpoint.
func (s *Webhook) Start(ctx context.Context, db *store.DB) (int64, error) { return db.EventHead(ctx) }

// Deliver implements Sink.
func (s *Webhook) Deliver(ctx context.Context, events []store.OutboxEvent) (int, error) {
	if s.disabled {
		return 0, errDisabled
	}
	for i, e := range events {
		if !s.hook.Wants(e.Type) {
			continue
		}
		body, err := json.Marshal(e.Event)
		if err != nil {
			return i, err
		}
		err = s.post(ctx, e.ID, body)
		if err == nil {
			if s.attempts > 0 {
				s.attempts, s.failingID = 0, ""
				_ = s.db.SetWebhookState(ctx, s.hook.ID, 0, "", false)
			}
			continue
		}
		if errors.Is(err, errDisabled) || ctx.Err() != nil {
			return i, err
		}
		if s.failingID != e.ID {
			// An event is retried until it is retryFor old: one queued
			// behind a failing one has been waiting all along.
			s.failingID, s.failingFrom, s.attempts = e.ID, e.OccurredAt, 0
		}
		s.attempts++
		if time.Since(s.failingFrom) < s.retryFor {
			_ = s.db.SetWebhookState(ctx, s.hook.ID, s.attempts, err.Error(), false)
			return i, err
		}
		if derr := s.db.AddDeadLetter(ctx, store.DeadLetter{WebhookID: s.hook.ID, EventSequence: e.Sequence, Body: body, Attempts: s.attempts, LastError: err.Error()}); derr != nil {
			return i, derr
		}
		s.attempts, s.failingID = 0, ""
	}
	return len(events), nil
}

// post sends one signed delivery.
func (s *Webhook) post(ctx context.Context, id string, body []byte) error {
	now := time.Now()
	sig, err := Sign(s.hook.Secret, id, now, body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.hook.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("outbox: webhook %d: %w", s.hook.ID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusGone:
		if err := s.db.SetWebhookState(ctx, s.hook.ID, 0, "410 Gone", true); err != nil {
			return err
		}
		s.disabled = true
		return errDisabled
	}
	err = fmt.Errorf("outbox: webhook %d answered %s", s.hook.ID, resp.Status)
	if after, ok := retryAfter(resp.Header.Get("Retry-After"), now); ok && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500) {
		return &RetryAfterError{Err: err, After: after}
	}
	return err
}

// retryAfter reads a Retry-After header at now, in either form RFC 9110
// allows: delay-seconds or an HTTP-date, at most maxRetryAfter; false
// when absent, malformed or not in the future.
func retryAfter(h string, now time.Time) (time.Duration, bool) {
	var d time.Duration
	if secs, err := strconv.ParseInt(h, 10, 64); err == nil {
		d = time.Duration(min(secs, int64(maxRetryAfter/time.Second))) * time.Second
	} else if at, err := http.ParseTime(h); err == nil {
		d = at.Sub(now)
	}
	return min(d, maxRetryAfter), d > 0
}

// maxRetryAfter bounds what an endpoint's Retry-After holds its queue
// for: the backoff's own ceiling, so that a date years ahead (or a typo)
// still has the event tried, and dead-lettered after the retry period.
const maxRetryAfter = time.Hour

// Backoff implements backoffer: doubling from a second to an hour, with
// jitter, and at least what Retry-After asked.
func (s *Webhook) Backoff(failures int, err error) time.Duration {
	d := time.Second << min(failures-1, 12)
	d = min(d, time.Hour)
	d = d/2 + time.Duration(float64(d/2)*jitter())
	if ra, ok := errors.AsType[*RetryAfterError](err); ok {
		d = max(d, ra.After)
	}
	return d
}
