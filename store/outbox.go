package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/flashsale/flashsale"
)

// The transactional outbox's writing side. A transaction's changes add
// their events to the Tx as they happen (addOrderEvent, checkVoucher), and
// DB.Tx writes them all in one statement just before it commits: an event
// exists if and only if its change committed, and a transaction pays one
// more round trip, not one per event. Voucher events are conditional on the
// voucher's remaining stock at that point, read in the same statement
// (INSERT … SELECT … FROM vouchers WHERE remaining = ?), with the
// voucher's row already locked by the change itself.

// outboxRows are the events a transaction will write.
type outboxRows struct {
	orders   []orderEvent
	vouchers []voucherCheck
}

// orderEvent is an order event: its type and the order after the change.
type orderEvent struct {
	typ  flashsale.EventType
	o    flashsale.Order
	data []byte
}

// voucherCheck is a voucher event written only if the voucher's
// remaining stock is remaining when the transaction ends: 0 for sold out
// (after taking stock), the units given back for restocked (it was 0).
type voucherCheck struct {
	typ       flashsale.EventType
	voucherID int64
	remaining int
}

// voucherEventData is the voucher as a voucher event's data shows it,
// built by the database from the row it locked: id, title, stock and
// remaining (MySQL's JSON_OBJECT and SQLite's json_object).
const voucherEventData = "JSON_OBJECT('id', CAST(id AS CHAR), 'title', title, 'stock', stock, 'remaining', remaining)"

// addOrderEvent records an order event of o as it is now.
func (tx *Tx) addOrderEvent(typ flashsale.EventType, o *flashsale.Order) error {
	data, err := json.Marshal(o.EventData())
	if err != nil {
		return fmt.Errorf("store: event data of order %d: %w", o.ID, err)
	}
	tx.events.orders = append(tx.events.orders, orderEvent{typ, *o, data})
	return nil
}

// checkVoucher records a voucher event to write if the voucher's remaining
// stock is remaining at commit. A voucher checked twice for one type is
// checked once.
func (tx *Tx) checkVoucher(typ flashsale.EventType, voucherID int64, remaining int) {
	c := voucherCheck{typ, voucherID, remaining}
	if !slices.Contains(tx.events.vouchers, c) {
		tx.events.vouchers = append(tx.events.vouchers, c)
	}
}

// DecrementRemaining is Queries.DecrementRemaining inside tx: a decrement
// that leaves nothing writes voucher.sold_out at commit.
func (tx *Tx) DecrementRemaining(ctx context.Context, voucherID int64, n int) (bool, error) {
	ok, err := tx.Queries.DecrementRemaining(ctx, voucherID, n)
	if ok {
		tx.checkVoucher(flashsale.EventVoucherSoldOut, voucherID, 0)
	}
	return ok, err
}

// SetRemainingFenced is Queries.SetRemainingFenced; a write of 0 runs in a
// transaction with its voucher.sold_out event.
func (db *DB) SetRemainingFenced(ctx context.Context, voucherID int64, old, n int, fence int64) (ok bool, err error) {
	if n != 0 {
		return db.Queries.SetRemainingFenced(ctx, voucherID, old, n, fence)
	}
	err = db.Tx(ctx, func(tx *Tx) error {
		ok, err = tx.Queries.SetRemainingFenced(ctx, voucherID, old, n, fence)
		if ok {
			tx.checkVoucher(flashsale.EventVoucherSoldOut, voucherID, 0)
		}
		return err
	})
	return ok, err
}

// WithoutOutbox returns db (the same pools) writing no events: for the
// benchmarks that measure what the outbox costs, never for a service.
func (db *DB) WithoutOutbox() *DB {
	c := *db
	c.noOutbox = true
	return &c
}

// writeEvents writes the transaction's events to the outbox, order events
// in the order they happened, then the voucher events whose condition
// holds.
func (tx *Tx) writeEvents(ctx context.Context) error {
	rows := tx.events
	tx.events = outboxRows{}
	if tx.noOutbox || len(rows.orders) == 0 && len(rows.vouchers) == 0 {
		return nil
	}
	at := dbTime(now())
	// A few events and a voucher check (one order, and the stock it
	// took): one compound statement. More: multi-row VALUES, which
	// MySQL inserts without the compound's temporary table, then the
	// checks.
	if len(rows.orders) <= unionMax && len(rows.vouchers) > 0 {
		return tx.insertEvents(ctx, rows.orders, rows.vouchers, at)
	}
	for chunk := range slices.Chunk(rows.orders, persistChunk) {
		if err := tx.insertEvents(ctx, chunk, nil, at); err != nil {
			return err
		}
	}
	if len(rows.vouchers) == 0 {
		return nil
	}
	return tx.insertEvents(ctx, nil, rows.vouchers, at)
}

// unionMax is the most order events written in one compound statement
// with voucher checks.
const unionMax = 4

// insertEvents writes order events and voucher checks in one statement:
// VALUES rows when there are no checks, else a compound SELECT.
func (tx *Tx) insertEvents(ctx context.Context, orders []orderEvent, checks []voucherCheck, at string) error {
	var b strings.Builder
	args := make([]any, 0, 5*len(orders)+4*len(checks))
	b.WriteString("INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at) ")
	row, sep := "SELECT ?, ?, ?, ?, ?", " UNION ALL "
	if len(checks) == 0 {
		b.WriteString("VALUES ")
		row, sep = "(?, ?, ?, ?, ?)", ", "
	}
	for i, e := range orders {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(row)
		t := at
		if !e.o.UpdatedAt.IsZero() {
			t = dbTime(e.o.UpdatedAt)
		}
		args = append(args, string(e.typ), e.o.ID, e.o.VoucherID, string(e.data), t)
	}
	for i, c := range checks {
		if i > 0 || len(orders) > 0 {
			b.WriteString(sep)
		}
		b.WriteString("SELECT ?, 0, id, " + voucherEventData + ", ? FROM vouchers WHERE id = ? AND remaining = ?")
		args = append(args, string(c.typ), at, c.voucherID, c.remaining)
	}
	if _, err := tx.w.ExecContext(ctx, b.String(), args...); err != nil {
		return wrap(fmt.Sprintf("write %d events", len(orders)+len(checks)), err)
	}
	return nil
}
