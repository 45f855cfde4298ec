package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// The transactional outbox's writing side. The order.placed events of
// the orders a stock decrement places (PlaceOrder; takeStock for the
// batch strategy and the consumer's persist) are written by the
// database, by triggers (outboxtriggers.go): on the decrement, one row
// per decrement, type order.placed, order_id 0, n the number of orders
// and data their ids, which the readers expand into one event each from
// the orders table (expand.go); on MySQL, PlaceOrder's one order's row
// by a trigger on its insert instead, before the voucher's row lock
// (migration 00015). An order's fields an order.placed shows never
// change after the insert (its id, voucher, buyer, quantity, pay_by; its
// status then follows from pay_by), and orders are never deleted, so the
// expansion is the order as it was placed — and a sale's transaction
// writes no event of its own: no round trip, no JSON. The voucher events
// are written by triggers too (stocktriggers.go).
//
// Every other order event (paid, cancelled, expired, failed, and placed
// by InsertOrder without PlaceOrder) is added to the Tx as it
// happens, and DB.Tx writes them just before it commits, in multi-row
// INSERTs of up to 500: an event exists if and only if its change
// committed, at one more round trip per transaction, not one per event.

// outboxRows are the events a transaction will write.
type outboxRows struct {
	rows []outboxRow
}

// outboxRow is a row the transaction will write: one order event with its
// data.
type outboxRow struct {
	typ       flashsale.EventType
	orderID   int64
	voucherID int64
	data      []byte
	at        time.Time
}

// addOrderEvent records an order event of o as it is now.
func (tx *Tx) addOrderEvent(typ flashsale.EventType, o *flashsale.Order) {
	tx.events.rows = append(tx.events.rows, outboxRow{typ: typ, orderID: o.ID, voucherID: o.VoucherID,
		data: o.AppendEventData(nil), at: o.UpdatedAt})
}

// WithoutOutbox returns db (the same pools) writing no events: for the
// benchmarks that measure what the outbox costs, never for a service.
func (db *DB) WithoutOutbox() *DB {
	c := *db
	c.noOutbox = true
	return &c
}

// writeEvents writes the transaction's order events to the outbox, in the
// order they happened.
func (tx *Tx) writeEvents(ctx context.Context) error {
	rows := tx.events.rows
	tx.events.rows = nil
	if tx.noOutbox || len(rows) == 0 {
		return nil
	}
	at := dbTime(now())
	for chunk := range slices.Chunk(rows, persistChunk) {
		var b strings.Builder
		args := make([]any, 0, 6*len(chunk))
		b.WriteString("INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at, n) VALUES ")
		b.WriteString(valueRows(len(chunk), 6))
		for _, r := range chunk {
			t := at
			if !r.at.IsZero() {
				t = dbTime(r.at)
			}
			args = append(args, string(r.typ), r.orderID, r.voucherID, string(r.data), t, 1)
		}
		if _, err := tx.w.ExecContext(ctx, b.String(), args...); err != nil {
			return wrap(fmt.Sprintf("write %d events", len(chunk)), err)
		}
	}
	return nil
}

// appendIDs appends ids to b as a batch row's data: a JSON array of the
// first id and then each id's difference from the one before. A batch's
// ids are sorted and close together (one ID generator's range), so a
// 19-digit id mostly costs a few digits: a row of 500 is 1 to 4 KB, not 10.
func appendIDs(b []byte, ids []int64) []byte {
	b = append(b, '[')
	prev := int64(0)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id-prev, 10)
		prev = id
	}
	return append(b, ']')
}

// parseIDs reads appendIDs' array.
func parseIDs(data string) ([]int64, error) {
	inner := strings.TrimSuffix(strings.TrimPrefix(data, "["), "]")
	if inner == data || inner == "" {
		return nil, fmt.Errorf("store: batch row data %.40q is not an array of order ids", data)
	}
	ids := make([]int64, 0, strings.Count(inner, ",")+1)
	prev := int64(0)
	for s := range strings.SplitSeq(inner, ",") {
		d, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("store: batch row data: %w", err)
		}
		prev += d
		ids = append(ids, prev)
	}
	return ids, nil
}
