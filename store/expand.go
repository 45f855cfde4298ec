package store

import (
	"context"
	"slices"
	"strconv"

	"github.com/flashsale/flashsale"
)

// The expansion of batch rows: the order.placed events of the orders a
// stock decrement placed are one outbox row (outbox.go); readers get one
// event per order, at consecutive positions.

// batchRow is a batch row among events: its index and its events.
type batchRow struct {
	at int
	n  int64
}

// expand replaces each batch row among events by its events: the
// order.placed of each of its orders, as placed (created, or awaiting
// payment with the pay_by it still has), read from the orders table, at
// positions pos, pos + 1, … in the row's order. An order deleted by hand
// since shows only its order_id.
func (db *DB) expand(ctx context.Context, events []OutboxEvent, batches []batchRow) ([]OutboxEvent, error) {
	lists := make([][]int64, len(batches))
	var ids []int64
	for i, b := range batches {
		list, err := parseIDs(string(events[b.at].Data))
		if err != nil {
			return nil, err
		}
		lists[i] = list
		ids = append(ids, list...)
	}
	orders, err := db.placedOrders(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]OutboxEvent, 0, len(events)+len(ids))
	// One buffer for every event's data (each keeps its own array if
	// the buffer grows).
	var buf []byte
	next := 0
	for i, b := range batches {
		out = append(out, events[next:b.at]...)
		row := events[b.at]
		for j, id := range lists[i] {
			e := row
			if row.Pos > 0 {
				e.Pos = row.Pos + int64(j)
			}
			e.Sequence, e.ID, e.OrderID = e.Pos, flashsale.EventID(e.Pos), id
			start := len(buf)
			if o, ok := orders[id]; ok {
				e.VoucherID, buf = o.VoucherID, o.AppendEventData(buf)
			} else {
				buf = flashsale.OrderData{OrderID: strconv.FormatInt(id, 10)}.AppendJSON(buf)
			}
			e.Data = buf[start:len(buf):len(buf)]
			out = append(out, e)
		}
		next = b.at + 1
	}
	return append(out, events[next:]...), nil
}

// placedOrders returns the orders with the given ids as they were placed:
// status awaiting_payment when they have a pay_by, created otherwise.
func (db *DB) placedOrders(ctx context.Context, ids []int64) (map[int64]*flashsale.Order, error) {
	orders := make(map[int64]*flashsale.Order, len(ids))
	for chunk := range slices.Chunk(ids, persistChunk) {
		rows, err := db.r.QueryContext(ctx, "SELECT id, voucher_id, user_id, quantity, pay_by FROM orders WHERE id IN "+placeholders(len(chunk)), anys(chunk)...)
		if err != nil {
			return nil, wrap("read placed orders", err)
		}
		for rows.Next() {
			o := &flashsale.Order{Status: flashsale.StatusCreated}
			if err := rows.Scan(&o.ID, &o.VoucherID, &o.UserID, &o.Quantity, scanNullTime{&o.PayBy}); err != nil {
				rows.Close()
				return nil, wrap("read placed orders", err)
			}
			if !o.PayBy.IsZero() {
				o.Status = flashsale.StatusAwaitingPayment
			}
			orders[o.ID] = o
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, wrap("read placed orders", err)
		}
	}
	return orders, nil
}
