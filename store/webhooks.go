package store

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// WebhookCursor is the outbox cursor of the webhook with the given id.
func WebhookCursor(id int64) string { return fmt.Sprintf("webhook:%d", id) }

// CreateWebhook stores w (its ID set by the caller) with its cursor at the
// head of the outbox: it is sent the events from now on.
func (db *DB) CreateWebhook(ctx context.Context, w *flashsale.Webhook) error {
	w.CreatedAt = now()
	return db.Tx(ctx, func(tx *Tx) error {
		_, err := tx.w.ExecContext(ctx, "INSERT INTO webhooks (id, url, events, secret, created_at) VALUES (?, ?, ?, ?, ?)",
			w.ID, w.URL, joinTypes(w.Events), w.Secret, dbTime(w.CreatedAt))
		if err != nil {
			return wrap("create webhook", err)
		}
		_, err = tx.w.ExecContext(ctx, "INSERT INTO outbox_cursors (name, pos) SELECT ?, pos - 1 FROM outbox_cursors WHERE name = ?", WebhookCursor(w.ID), SequenceName)
		return wrap("create webhook cursor", err)
	})
}

// joinTypes and splitTypes keep a webhook's event types in one column.
func joinTypes(types []flashsale.EventType) string {
	s := make([]string, len(types))
	for i, t := range types {
		s[i] = string(t)
	}
	return strings.Join(s, ",")
}

func splitTypes(s string) []flashsale.EventType {
	types := []flashsale.EventType{}
	for t := range strings.SplitSeq(s, ",") {
		if t != "" {
			types = append(types, flashsale.EventType(t))
		}
	}
	return types
}

// Webhooks returns every webhook, by id, with its secret and its count of
// dead letters.
func (db *DB) Webhooks(ctx context.Context) ([]flashsale.Webhook, error) {
	return db.webhooks(ctx, "(SELECT COUNT(*) FROM webhook_dead_letters d WHERE d.webhook_id = w.id)")
}

// WebhookSinks returns every webhook as Webhooks does, but with no count
// of dead letters (DeadLetters 0): what the relay lists every 2 s on every
// instance, whose cost must not grow with the dead letters.
func (db *DB) WebhookSinks(ctx context.Context) ([]flashsale.Webhook, error) {
	return db.webhooks(ctx, "0")
}

// webhooks reads the webhooks with dead, the SQL of their count of dead
// letters.
func (db *DB) webhooks(ctx context.Context, dead string) ([]flashsale.Webhook, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT w.id, w.url, w.events, w.secret, w.disabled, w.attempts, w.last_error, w.created_at,
		`+dead+` FROM webhooks w ORDER BY w.id`)
	if err != nil {
		return nil, wrap("webhooks", err)
	}
	defer rows.Close()
	hooks := []flashsale.Webhook{}
	for rows.Next() {
		var w flashsale.Webhook
		var events string
		if err := rows.Scan(&w.ID, &w.URL, &events, &w.Secret, &w.Disabled, &w.Attempts, &w.LastError, scanTime{&w.CreatedAt}, &w.DeadLetters); err != nil {
			return nil, wrap("webhooks", err)
		}
		w.Events = splitTypes(events)
		hooks = append(hooks, w)
	}
	return hooks, wrap("webhooks", rows.Err())
}

// DeleteWebhook deletes the webhook, its cursor and its dead letters, or
// returns ENotFound.
func (db *DB) DeleteWebhook(ctx context.Context, id int64) error {
	return db.Tx(ctx, func(tx *Tx) error {
		res, err := tx.w.ExecContext(ctx, "DELETE FROM webhooks WHERE id = ?", id)
		if err != nil {
			return wrap("delete webhook", err)
		}
		if ok, err := oneRow(res, "delete webhook"); err != nil || !ok {
			return cmp.Or(err, error(flashsale.Errorf(flashsale.ENotFound, "webhook %d not found", id)))
		}
		if _, err := tx.w.ExecContext(ctx, "DELETE FROM webhook_dead_letters WHERE webhook_id = ?", id); err != nil {
			return wrap("delete webhook", err)
		}
		_, err = tx.w.ExecContext(ctx, "DELETE FROM outbox_cursors WHERE name = ?", WebhookCursor(id))
		return wrap("delete webhook", err)
	})
}

// SetWebhookState records the webhook's failing head delivery (attempts 0:
// none) and whether it is disabled.
func (db *DB) SetWebhookState(ctx context.Context, id int64, attempts int, lastError string, disabled bool) error {
	if len(lastError) > 255 {
		lastError = lastError[:255]
	}
	_, err := db.w.ExecContext(ctx, "UPDATE webhooks SET attempts = ?, last_error = ?, disabled = ? WHERE id = ?", attempts, lastError, disabled, id)
	return wrap("webhook state", err)
}

// DeadLetter is an event a webhook never took.
type DeadLetter struct {
	WebhookID, EventSequence int64
	Body                     []byte
	Attempts                 int
	LastError                string
	DeadAt                   time.Time
}

// AddDeadLetter records d (again: kept once).
func (db *DB) AddDeadLetter(ctx context.Context, d DeadLetter) error {
	if len(d.LastError) > 255 {
		d.LastError = d.LastError[:255]
	}
	_, err := db.w.ExecContext(ctx, insertIgnoreVerb(db.dialect)+" webhook_dead_letters (webhook_id, event_id, body, attempts, last_error, dead_at) VALUES (?, ?, ?, ?, ?, ?)",
		d.WebhookID, d.EventSequence, string(d.Body), d.Attempts, d.LastError, dbTime(now()))
	return wrap("dead letter", err)
}

// DeadLetters returns up to max of the webhook's dead letters, oldest
// event first.
func (db *DB) DeadLetters(ctx context.Context, webhookID int64, max int) ([]DeadLetter, error) {
	rows, err := db.r.QueryContext(ctx, "SELECT event_id, body, attempts, last_error, dead_at FROM webhook_dead_letters WHERE webhook_id = ? ORDER BY event_id LIMIT ?", webhookID, max)
	if err != nil {
		return nil, wrap("dead letters", err)
	}
	defer rows.Close()
	out := []DeadLetter{}
	for rows.Next() {
		d := DeadLetter{WebhookID: webhookID}
		var body string
		if err := rows.Scan(&d.EventSequence, &body, &d.Attempts, &d.LastError, scanTime{&d.DeadAt}); err != nil {
			return nil, wrap("dead letters", err)
		}
		d.Body = []byte(body)
		out = append(out, d)
	}
	return out, wrap("dead letters", rows.Err())
}

// DeleteDeadLetter deletes one dead letter (redelivered).
func (db *DB) DeleteDeadLetter(ctx context.Context, webhookID, eventSequence int64) error {
	_, err := db.w.ExecContext(ctx, "DELETE FROM webhook_dead_letters WHERE webhook_id = ? AND event_id = ?", webhookID, eventSequence)
	return wrap("delete dead letter", err)
}

// FindWebhook returns one webhook, or ENotFound.
func (db *DB) FindWebhook(ctx context.Context, id int64) (*flashsale.Webhook, error) {
	hooks, err := db.Webhooks(ctx)
	if err != nil {
		return nil, err
	}
	for i := range hooks {
		if hooks[i].ID == id {
			return &hooks[i], nil
		}
	}
	return nil, flashsale.Errorf(flashsale.ENotFound, "webhook %d not found", id)
}
