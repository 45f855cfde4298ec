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
// their order events to the Tx as they happen (addOrderEvent), and DB.Tx
// writes them just before it commits, in multi-row INSERTs of up to 500:
// an event exists if and only if its change committed, at one more round
// trip per transaction, not one per event. The voucher events are written
// by the database itself, by triggers on the vouchers' stock
// (stocktriggers.go), in the statement that changes it.

// outboxRows are the events a transaction will write.
type outboxRows struct {
	orders []orderEvent
	// written are the orders whose order.placed was written already
	// (WriteOrderPlaced).
	written map[int64]bool
}

// orderEvent is an order event: its type and the order after the change.
type orderEvent struct {
	typ  flashsale.EventType
	o    flashsale.Order
	data []byte
}

// addOrderEvent records an order event of o as it is now.
func (tx *Tx) addOrderEvent(typ flashsale.EventType, o *flashsale.Order) error {
	if typ == flashsale.EventOrderPlaced && tx.events.written[o.ID] {
		return nil
	}
	data, err := json.Marshal(o.EventData())
	if err != nil {
		return fmt.Errorf("store: event data of order %d: %w", o.ID, err)
	}
	tx.events.orders = append(tx.events.orders, orderEvent{typ, *o, data})
	return nil
}

// WriteOrderPlaced writes now the order.placed event of o, an order this
// transaction is about to insert (InsertOrder: status created, or
// awaiting payment with a PayBy), and InsertOrder will not write it
// again. A strategy calls it before it takes the hot voucher's row lock,
// so the write does not lengthen the time every buyer waits for that lock;
// a rollback takes the event back with the order.
func (tx *Tx) WriteOrderPlaced(ctx context.Context, o *flashsale.Order) error {
	placed := *o
	placed.Status, placed.Quantity, placed.UpdatedAt = flashsale.StatusCreated, o.Units(), now()
	if !o.PayBy.IsZero() {
		placed.Status = flashsale.StatusAwaitingPayment
	}
	pending := tx.events
	tx.events = outboxRows{}
	err := tx.addOrderEvent(flashsale.EventOrderPlaced, &placed)
	if err == nil {
		err = tx.writeEvents(ctx)
	}
	tx.events = pending
	if tx.events.written == nil {
		tx.events.written = map[int64]bool{}
	}
	tx.events.written[o.ID] = true
	return err
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
	rows := tx.events.orders
	tx.events.orders = nil
	if tx.noOutbox {
		return nil
	}
	at := dbTime(now())
	for chunk := range slices.Chunk(rows, persistChunk) {
		var b strings.Builder
		args := make([]any, 0, 5*len(chunk))
		b.WriteString("INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at) VALUES ")
		for i, e := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?)")
			t := at
			if !e.o.UpdatedAt.IsZero() {
				t = dbTime(e.o.UpdatedAt)
			}
			args = append(args, string(e.typ), e.o.ID, e.o.VoucherID, string(e.data), t)
		}
		if _, err := tx.w.ExecContext(ctx, b.String(), args...); err != nil {
			return wrap(fmt.Sprintf("write %d events", len(chunk)), err)
		}
	}
	return nil
}
