package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// A persisted batch is one outbox row, read as one order.placed per order:
// each at its own position (sequence and id), with the order as it was
// placed even after it was paid, and pages and pruning that cut the row.
func TestOutboxBatchRowExpands(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		v := createVoucher(t, db, 1, 100)
		payBy := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		orders := batch(1, 1, 2, 3, 4, 5)
		orders[1].PayBy = payBy
		if res := persist(t, db, orders); res.Inserted != 5 {
			t.Fatalf("PersistOrders = %+v, want 5 inserted", res)
		}
		var rows int
		if err := db.r.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM outbox").Scan(&rows); err != nil || rows != 1 {
			t.Fatalf("outbox rows = %d, %v; want 1 for the batch", rows, err)
		}
		if _, _, err := db.PayOrder(t.Context(), flashsale.Payment{ID: "p", OrderID: orders[1].ID, Amount: v.PayValue}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if n, err := db.SequenceEvents(t.Context(), 100); err != nil || n != 6 {
			t.Fatalf("SequenceEvents = %d, %v; want 6 events", n, err)
		}
		all, err := db.EventsAfter(t.Context(), 0, 100)
		if err != nil || len(all) != 6 {
			t.Fatalf("EventsAfter = %d events, %v; want 6", len(all), err)
		}
		for i, e := range all[:5] {
			placed := orders[i]
			placed.Quantity, placed.Status = placed.Units(), flashsale.StatusCreated
			if !placed.PayBy.IsZero() {
				placed.Status = flashsale.StatusAwaitingPayment
			}
			want, _ := json.Marshal(placed.EventData())
			if e.Type != flashsale.EventOrderPlaced || e.OrderID != placed.ID || e.VoucherID != 1 || string(e.Data) != string(want) {
				t.Errorf("event %d = %s %d v%d %s, want order.placed %s", i, e.Type, e.OrderID, e.VoucherID, e.Data, want)
			}
			if e.Pos != all[0].Pos+int64(i) || e.Sequence != e.Pos || e.ID != flashsale.EventID(e.Pos) {
				t.Errorf("event %d at pos %d, sequence %d, id %s; want pos %d", i, e.Pos, e.Sequence, e.ID, all[0].Pos+int64(i))
			}
		}
		if paid := all[5]; paid.Type != flashsale.EventOrderPaid || paid.OrderID != orders[1].ID || paid.Sequence <= all[1].Sequence {
			t.Errorf("last event = %+v, want order.paid of %d after its order.placed", paid, orders[1].ID)
		}
		page, err := db.EventsAfter(t.Context(), all[1].Pos, 2)
		if err != nil || len(page) != 2 || page[0].ID != all[2].ID || page[1].ID != all[3].ID {
			t.Fatalf("EventsAfter(inside the batch, 2) = %+v, %v; want events 3 and 4", page, err)
		}
		// A sink inside the batch: the row stays until the sink passed all
		// of it, and is its oldest undelivered event.
		now := time.Now()
		if _, ok, err := db.ClaimCursor(t.Context(), "nats", "a", all[2].Pos, now, now.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("ClaimCursor = %v, %v", ok, err)
		}
		if n, err := db.PruneEvents(t.Context(), now.Add(time.Hour), 100); err != nil || n != 0 {
			t.Fatalf("PruneEvents = %d, %v; want 0", n, err)
		}
		lags, err := db.OutboxLag(t.Context())
		if err != nil || len(lags) != 2 || lags[1].Backlog != 3 || lags[1].Oldest.IsZero() {
			t.Fatalf("OutboxLag = %+v, %v; want nats 3 behind", lags, err)
		}
		if _, err := db.AdvanceCursor(t.Context(), "nats", "a", all[4].Pos, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if n, err := db.PruneEvents(t.Context(), now.Add(time.Hour), 100); err != nil || n != 1 {
			t.Fatalf("PruneEvents = %d, %v; want the batch row", n, err)
		}
	})
}

// PlaceOrder inserts the order and then decrements, counting the order
// live and writing its order.placed in the decrement, once; it refuses an
// order that is not placed, and reports a sold-out voucher (the caller
// rolls back, and nothing of the order stays).
func TestPlaceOrderCountsLiveOnce(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		for _, o := range []*flashsale.Order{{ID: 1, VoucherID: 1, UserID: 1}, {ID: 2, VoucherID: 1, UserID: 2, Status: flashsale.StatusFailed}} {
			err := db.Tx(t.Context(), func(tx *Tx) error {
				if ok, err := tx.PlaceOrder(t.Context(), o, 1); err != nil || !ok {
					return cmp.Or(err, errors.New("sold out"))
				}
				return nil
			})
			if o.ID == 2 {
				wantCode(t, err, flashsale.EInvalid)
			} else if err != nil {
				t.Fatal(err)
			}
		}
		soldOut := errors.New("sold out")
		err := db.Tx(t.Context(), func(tx *Tx) error {
			if ok, err := tx.PlaceOrder(t.Context(), &flashsale.Order{ID: 3, VoucherID: 1, UserID: 3, Quantity: 10}, 10); err != nil || ok {
				t.Fatalf("PlaceOrder of 10 with 9 left = %v, %v; want false", ok, err)
			}
			return soldOut
		})
		if !errors.Is(err, soldOut) {
			t.Fatalf("Tx = %v; want the rollback's error", err)
		}
		if _, err := db.FindOrder(t.Context(), 3); flashsale.ErrorCode(err) != flashsale.ENotFound {
			t.Fatalf("FindOrder(3) = %v; want ENotFound after the rollback", err)
		}
		v, err := db.FindVoucher(t.Context(), 1)
		if err != nil || v.Orders != 1 || v.Remaining != 9 {
			t.Fatalf("FindVoucher = %+v, %v; want 1 live order, 9 left", v, err)
		}
		wantOutbox(t, db, "order.placed 1")
		if _, err := db.SequenceEvents(t.Context(), 10); err != nil {
			t.Fatal(err)
		}
		events, err := db.EventsAfter(t.Context(), 0, 10)
		want, _ := json.Marshal((&flashsale.Order{ID: 1, VoucherID: 1, UserID: 1, Quantity: 1, Status: flashsale.StatusCreated}).EventData())
		if err != nil || len(events) != 1 || string(events[0].Data) != string(want) {
			t.Fatalf("EventsAfter = %+v, %v; want order 1 placed, %s", events, err, want)
		}
	})
}

// PlaceOrder's order.placed is written once whatever the transaction
// inserts after it: on MySQL by the trigger on its insert (migration
// 00015), which answers to that one order, so neither a plain insert nor
// a batch's multi-row insert after it, in its transaction or on its
// connection, writes another, and the decrement writes none; a
// PlaceOrder whose insert fails writes none, and leaves nothing that
// makes a later insert of that id write one. Ids near 2^62, as idgen's
// are: two that differ by 1 must not be taken for one another.
func TestPlacedEventOnceWhateverFollows(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		const base = int64(1)<<62 + 10
		createVoucher(t, db, 1, 10)
		db.writer.SetMaxOpenConns(1) // one connection: the session variable's
		place := func(o *flashsale.Order, limit int) error {
			return db.Tx(t.Context(), func(tx *Tx) error {
				if ok, err := tx.PlaceOrder(t.Context(), o, limit); err != nil || !ok {
					return cmp.Or(err, errors.New("sold out"))
				}
				return nil
			})
		}
		if err := place(&flashsale.Order{ID: base + 1, VoucherID: 1, UserID: 1, IdempotencyKey: "k"}, 2); err != nil {
			t.Fatal(err)
		}
		err := db.Tx(t.Context(), func(tx *Tx) error {
			if ok, err := tx.PlaceOrder(t.Context(), &flashsale.Order{ID: base + 2, VoucherID: 1, UserID: 2}, 1); err != nil || !ok {
				return cmp.Or(err, errors.New("sold out"))
			}
			return tx.InsertOrder(t.Context(), &flashsale.Order{ID: base + 3, VoucherID: 1, UserID: 3, Status: flashsale.StatusFailed}, 1)
		})
		if err != nil {
			t.Fatal(err)
		}
		// A new id whose insert fails (the buyer, under his limit of 2,
		// reuses his key): its order.placed must not come with a later
		// insert of that id.
		err = place(&flashsale.Order{ID: base + 4, VoucherID: 1, UserID: 1, IdempotencyKey: "k"}, 2)
		if !errors.Is(err, ErrKeyTaken) {
			t.Fatalf("PlaceOrder with a taken key = %v; want ErrKeyTaken", err)
		}
		if _, err := db.PersistOrders(t.Context(), []flashsale.Order{{ID: base + 4, VoucherID: 1, UserID: 4, Quantity: 1}, {ID: base + 5, VoucherID: 1, UserID: 5, Quantity: 1}}); err != nil {
			t.Fatal(err)
		}
		wantOutbox(t, db, fmt.Sprintf("order.placed %d", base+1), fmt.Sprintf("order.placed %d", base+2), fmt.Sprintf("order.failed %d", base+3),
			fmt.Sprintf("order.placed %d", base+4), fmt.Sprintf("order.placed %d", base+5))
		var rows int
		if err := db.writer.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM outbox").Scan(&rows); err != nil || rows != 4 {
			t.Fatalf("outbox rows = %d, %v; want 4: two placings, the failure, the batch", rows, err)
		}
		if db.Dialect() == MySQL {
			var placed string
			if err := db.writer.QueryRowContext(t.Context(), "SELECT placed_orders FROM vouchers WHERE id = 1").Scan(&placed); err != nil || placed != string(appendIDs(nil, []int64{base + 4, base + 5})) {
				t.Fatalf("placed_orders = %q, %v; want only the batch's: PlaceOrder's decrement writes none on MySQL", placed, err)
			}
		}
	})
}
