package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// The outbox's reading side (docs/events.md). Ids are handed out when a
// row is inserted, not when it commits, so a reader that followed ids
// could pass an id whose transaction commits later and never see it. The
// sequencer (SequenceEvents) gives each committed row a position, pos, in
// the order rows become visible; readers follow pos: the pull API by its
// cursor, each sink by its row in outbox_cursors.

// SequenceName is the outbox_cursors row that holds the next position.
const SequenceName = "sequence"

// OutboxEvent is an event as the outbox keeps it: the event and its
// position in the log (0 until sequenced).
type OutboxEvent struct {
	flashsale.Event
	Pos int64
}

// SequenceEvents gives up to max committed rows without a position their
// positions, in id order, and returns how many events it positioned (a
// batch row holds several). The sequencers of every instance run one at a
// time (the sequence row's lock); a row's first position is above every
// position given before it, and a row of n events takes n positions.
func (db *DB) SequenceEvents(ctx context.Context, max int) (int, error) {
	var n int
	err := db.Tx(ctx, func(tx *Tx) error {
		var next int64
		err := tx.w.QueryRowContext(ctx, "SELECT pos FROM outbox_cursors WHERE name = ?"+forUpdate(tx.dialect), SequenceName).Scan(&next)
		if err != nil {
			return wrap("sequence events: lock", err)
		}
		// A plain read: its snapshot starts now, after the lock, and a
		// locking one would lock the gap new rows are inserted into.
		rows, err := unsequenced(ctx, tx.w, max)
		if err != nil || len(rows) == 0 {
			return err
		}
		// pos = id + off keeps id order and starts at next; the gaps
		// between ids stay gaps, and off grows by n - 1 after a row of n
		// events: one UPDATE per run of rows with one off.
		off := next - rows[0].id
		var run []any
		for i, r := range rows {
			run = append(run, r.id)
			n += int(r.n)
			if r.n == 1 && i < len(rows)-1 {
				continue
			}
			_, err = tx.w.ExecContext(ctx, "UPDATE outbox SET pos = id + ? WHERE id IN "+placeholders(len(run)), append([]any{off}, run...)...)
			if err != nil {
				return wrap("sequence events: set", err)
			}
			off += r.n - 1
			run = run[:0]
		}
		last := rows[len(rows)-1]
		_, err = tx.w.ExecContext(ctx, "UPDATE outbox_cursors SET pos = ? WHERE name = ?", last.id+off+1, SequenceName)
		return wrap("sequence events: next", err)
	})
	return n, err
}

// unsequencedRow is a row without a position: its id and events.
type unsequencedRow struct{ id, n int64 }

// unsequenced returns up to max committed rows without a position, by id.
func unsequenced(ctx context.Context, q querier, max int) ([]unsequencedRow, error) {
	rows, err := q.QueryContext(ctx, "SELECT id, n FROM outbox WHERE pos IS NULL ORDER BY id LIMIT ?", max)
	if err != nil {
		return nil, wrap("sequence events: find", err)
	}
	defer rows.Close()
	var found []unsequencedRow
	for rows.Next() {
		var r unsequencedRow
		if err := rows.Scan(&r.id, &r.n); err != nil {
			return nil, wrap("sequence events: find", err)
		}
		found = append(found, r)
	}
	return found, wrap("sequence events: find", rows.Err())
}

// eventColumns are the columns scanEvent reads.
const eventColumns = "id, type, order_id, voucher_id, data, occurred_at, COALESCE(pos, 0), n"

// scanEvent reads eventColumns: one event, or the first of a batch row's
// (n > 1 or order_id 0 with an order type), whose data is its order ids
// (expand replaces them). An event's sequence, and so its id, is its
// position (0 until sequenced).
func scanEvent(row interface{ Scan(...any) error }) (OutboxEvent, int64, error) {
	var e OutboxEvent
	var data string
	var id, n int64
	err := row.Scan(&id, &e.Type, &e.OrderID, &e.VoucherID, &data, scanTime{&e.OccurredAt}, &e.Pos, &n)
	e.Sequence, e.ID, e.Data = e.Pos, flashsale.EventID(e.Pos), []byte(data)
	if e.OrderID == 0 && strings.HasPrefix(string(e.Type), "order.") {
		return e, max(n, 1), err
	}
	return e, 0, err
}

// EventsAfter returns up to limit sequenced events with a position above
// after, oldest first: the rest of the row that holds after, if any, then
// the rows above it.
func (db *DB) EventsAfter(ctx context.Context, after int64, limit int) ([]OutboxEvent, error) {
	events, err := db.rowAt(ctx, after)
	if err != nil {
		return nil, err
	}
	i := 0
	for i < len(events) && events[i].Pos <= after {
		i++
	}
	events = events[i:]
	if len(events) < limit {
		more, err := db.events(ctx, "SELECT "+eventColumns+" FROM outbox WHERE pos > ? ORDER BY pos LIMIT ?", after, limit-len(events))
		if err != nil {
			return nil, err
		}
		events = append(events, more...)
	}
	return events[:min(len(events), limit)], nil
}

// rowAt returns the events of the row at or below position pos, the
// nearest (none when there is none, or pos < 1): one index probe.
func (db *DB) rowAt(ctx context.Context, pos int64) ([]OutboxEvent, error) {
	if pos < 1 {
		return nil, nil
	}
	return db.events(ctx, "SELECT "+eventColumns+" FROM outbox WHERE pos <= ? ORDER BY pos DESC LIMIT 1", pos)
}

// events runs a query of eventColumns and expands its batch rows.
func (db *DB) events(ctx context.Context, query string, args ...any) ([]OutboxEvent, error) {
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrap("read events", err)
	}
	defer rows.Close()
	events := []OutboxEvent{}
	var batches []batchRow
	for rows.Next() {
		e, n, err := scanEvent(rows)
		if err != nil {
			return nil, wrap("read events", err)
		}
		if n > 0 {
			batches = append(batches, batchRow{len(events), n})
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("read events", err)
	}
	rows.Close()
	if len(batches) == 0 {
		return events, nil
	}
	return db.expand(ctx, events, batches)
}

// ClaimCursor takes the named cursor's lease for owner until until, or
// renews it, unless another owner's lease runs past now; it creates the
// cursor at start (the position delivered up to) if it does not exist.
// It returns the cursor's position and whether owner holds the lease.
func (db *DB) ClaimCursor(ctx context.Context, name, owner string, start int64, now, until time.Time) (int64, bool, error) {
	op := "claim cursor " + name
	if _, err := db.w.ExecContext(ctx, insertIgnoreVerb(db.dialect)+" outbox_cursors (name, pos) VALUES (?, ?)", name, start); err != nil {
		return 0, false, wrap(op, err)
	}
	res, err := db.w.ExecContext(ctx, "UPDATE outbox_cursors SET owner = ?, lease_until = ? WHERE name = ? AND (owner = ? OR owner = '' OR lease_until < ?)",
		owner, dbTime(until), name, owner, dbTime(now))
	if err != nil {
		return 0, false, wrap(op, err)
	}
	ok, err := oneRow(res, op)
	if err != nil || !ok {
		return 0, false, err
	}
	var pos int64
	err = db.w.QueryRowContext(ctx, "SELECT pos FROM outbox_cursors WHERE name = ? AND owner = ?", name, owner).Scan(&pos)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return pos, err == nil, wrap(op, err)
}

// AdvanceCursor moves the named cursor to pos and extends the lease to
// until, if owner still holds it; it reports false when another owner took
// it over (then the caller stops: the other goes on from the cursor).
func (db *DB) AdvanceCursor(ctx context.Context, name, owner string, pos int64, until time.Time) (bool, error) {
	res, err := db.w.ExecContext(ctx, "UPDATE outbox_cursors SET pos = ?, lease_until = ? WHERE name = ? AND owner = ?", pos, dbTime(until), name, owner)
	if err != nil {
		return false, wrap("advance cursor "+name, err)
	}
	return oneRow(res, "advance cursor "+name)
}

// ReleaseCursor gives up owner's lease of the named cursor.
func (db *DB) ReleaseCursor(ctx context.Context, name, owner string) error {
	_, err := db.w.ExecContext(ctx, "UPDATE outbox_cursors SET owner = '', lease_until = NULL WHERE name = ? AND owner = ?", name, owner)
	return wrap("release cursor "+name, err)
}

// EventHead returns the position below which every position is given.
func (db *DB) EventHead(ctx context.Context) (int64, error) {
	var next int64
	err := db.r.QueryRowContext(ctx, "SELECT pos FROM outbox_cursors WHERE name = ?", SequenceName).Scan(&next)
	return next - 1, wrap("event head", err)
}

// PruneEvents deletes up to max events that every sink's cursor has passed
// and that occurred before before, oldest first, and returns how many. It
// never deletes an event a cursor has not passed, nor the newest event
// (SQLite would give its id again).
func (db *DB) PruneEvents(ctx context.Context, before time.Time, max int) (int, error) {
	var low sql.NullInt64
	err := db.r.QueryRowContext(ctx, "SELECT MIN(pos) FROM outbox_cursors WHERE name <> ?", SequenceName).Scan(&low)
	if err != nil {
		return 0, wrap("prune events", err)
	}
	if !low.Valid { // no sink: every sequenced event is delivered
		if low.Int64, err = db.EventHead(ctx); err != nil {
			return 0, err
		}
	}
	ids, err := db.int64s(ctx, "prune events", "SELECT id FROM outbox WHERE pos <= ? AND pos + n - 1 <= ? AND occurred_at < ? AND id < (SELECT MAX(id) FROM outbox) ORDER BY pos LIMIT ?",
		low.Int64, low.Int64, dbTime(before), max)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	_, err = db.w.ExecContext(ctx, "DELETE FROM outbox WHERE id IN "+placeholders(len(ids)), anys(ids)...)
	if err != nil {
		return 0, wrap("prune events", err)
	}
	return len(ids), nil
}

// CursorLag is how far one sink's cursor is behind.
type CursorLag struct {
	Name string
	// Backlog is the positions between the cursor and the head, an upper
	// bound of the events not delivered yet (positions have gaps).
	Backlog int64
	// Oldest is when the oldest undelivered event occurred (zero: none).
	Oldest time.Time
}

// OutboxLag returns every cursor's lag, the sequencer's ("sequence": the
// events not sequenced yet) first. Each costs an index probe or two,
// whatever the backlog.
func (db *DB) OutboxLag(ctx context.Context) ([]CursorLag, error) {
	rows, err := db.r.QueryContext(ctx, "SELECT name, pos FROM outbox_cursors ORDER BY name")
	if err != nil {
		return nil, wrap("outbox lag", err)
	}
	type cursor struct {
		name string
		pos  int64
	}
	var cursors []cursor
	var head int64
	for rows.Next() {
		var c cursor
		if err := rows.Scan(&c.name, &c.pos); err != nil {
			rows.Close()
			return nil, wrap("outbox lag", err)
		}
		if c.name == SequenceName {
			head = c.pos - 1
		}
		cursors = append(cursors, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, wrap("outbox lag", err)
	}
	lags := []CursorLag{}
	for _, c := range cursors {
		l := CursorLag{Name: c.name, Backlog: max(head-c.pos, 0)}
		// The row holding the cursor's position if it holds more, and
		// the next row.
		q := "SELECT MIN(occurred_at) FROM (SELECT occurred_at FROM outbox WHERE pos = (SELECT MAX(pos) FROM outbox WHERE pos <= ?) AND pos + n > ? " +
			"UNION ALL SELECT occurred_at FROM (SELECT occurred_at FROM outbox WHERE pos > ? ORDER BY pos LIMIT 1) next) lag"
		args := []any{c.pos, c.pos + 1, c.pos}
		if c.name == SequenceName {
			var n int
			if err := db.r.QueryRowContext(ctx, "SELECT COALESCE(SUM(n), 0) FROM (SELECT n FROM outbox WHERE pos IS NULL LIMIT 10000) u").Scan(&n); err != nil {
				return nil, wrap("outbox lag", err)
			}
			l.Backlog, q, args = int64(n), "SELECT occurred_at FROM outbox WHERE pos IS NULL ORDER BY id LIMIT 1", nil
		}
		err := db.r.QueryRowContext(ctx, q, args...).Scan(scanNullTime{&l.Oldest})
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return nil, wrap(fmt.Sprintf("outbox lag of %s", c.name), err)
		}
		if c.name == SequenceName {
			lags = append([]CursorLag{l}, lags...)
		} else {
			lags = append(lags, l)
		}
	}
	return lags, nil
}

// CursorOwner returns the owner of the named cursor's lease ("" for none).
func (db *DB) CursorOwner(ctx context.Context, name string) (string, error) {
	var owner string
	err := db.r.QueryRowContext(ctx, "SELECT owner FROM outbox_cursors WHERE name = ?", name).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return owner, wrap("cursor owner "+name, err)
}

// OrdersOf returns every order of the voucher, by user id.
func (q Queries) OrdersOf(ctx context.Context, voucherID int64) ([]flashsale.Order, error) {
	return q.ordersOf(ctx, voucherID, "1 = 1")
}
