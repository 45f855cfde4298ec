package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// outboxRowsOf returns every event in the outbox, by id, as "type order"
// (order 0 for a voucher event: "type v<voucher>").
func outboxRowsOf(t testing.TB, db *DB) []string {
	t.Helper()
	events, err := db.events(t.Context(), "SELECT "+eventColumns+" FROM outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		if e.OrderID == 0 {
			got = append(got, fmt.Sprintf("%s v%d", e.Type, e.VoucherID))
		} else {
			got = append(got, fmt.Sprintf("%s %d", e.Type, e.OrderID))
		}
	}
	return got
}

// wantOutbox fails the test unless the outbox holds exactly want, by id.
func wantOutbox(t testing.TB, db *DB, want ...string) {
	t.Helper()
	if got := outboxRowsOf(t, db); !slices.Equal(got, want) {
		t.Fatalf("outbox = %q, want %q", got, want)
	}
}

func TestOutboxCommitWritesEventsRollbackNone(t *testing.T) {
	errStop := errors.New("stop")
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 2)
		err := db.Tx(t.Context(), func(tx *Tx) error {
			if err := takeOrder(t.Context(), tx, &flashsale.Order{ID: 5, VoucherID: 1, UserID: 50}); err != nil {
				return err
			}
			return errStop
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("Tx = %v, want errStop", err)
		}
		wantOutbox(t, db)
		for i, id := range []int64{6, 7} {
			err := db.Tx(t.Context(), func(tx *Tx) error {
				return takeOrder(t.Context(), tx, &flashsale.Order{ID: id, VoucherID: 1, UserID: 60 + int64(i)})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		// The last unit: sold out (written by the decrement's trigger), and
		// placed (at commit), in one transaction.
		wantOutbox(t, db, "order.placed 6", "voucher.sold_out v1", "order.placed 7")
		events, err := db.events(t.Context(), "SELECT "+eventColumns+" FROM outbox ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		var o flashsale.OrderData
		if err := json.Unmarshal(events[0].Data, &o); err != nil || o.OrderID != "6" || o.UserID != "60" || o.Status != flashsale.StatusCreated || o.Quantity != 1 {
			t.Errorf("placed data = %s (%v)", events[0].Data, err)
		}
		var v struct {
			ID        string `json:"id"`
			Remaining int    `json:"remaining"`
			Stock     int    `json:"stock"`
		}
		if err := json.Unmarshal(events[1].Data, &v); err != nil || v.ID != "1" || v.Remaining != 0 || v.Stock != 2 {
			t.Errorf("sold out data = %s (%v)", events[1].Data, err)
		}
	})
}

func TestOutboxPersistAndBatch(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 3)
		// A short batch stores nothing, and writes no event.
		_, err := db.PersistOrders(t.Context(), batch(1, 11, 12, 13, 14))
		if !errors.Is(err, flashsale.ErrStockShort) {
			t.Fatalf("PersistOrders = %v, want stock short", err)
		}
		wantOutbox(t, db)
		orders := batch(1, 11, 12)
		if _, err := db.PersistOrders(t.Context(), orders); err != nil {
			t.Fatal(err)
		}
		// Again: already present, no second event.
		if _, err := db.PersistOrders(t.Context(), orders); err != nil {
			t.Fatal(err)
		}
		sales, err := db.SellBatch(t.Context(), 1, batch(1, 13, 14))
		if err != nil || sales[0] != flashsale.OutcomeInserted || sales[1] != flashsale.OutcomeShort {
			t.Fatalf("SellBatch = %v, %v", sales, err)
		}
		want := []string{}
		for _, o := range orders {
			want = append(want, fmt.Sprintf("order.placed %d", o.ID))
		}
		// The orders' order.placed, then the sold out: both written by the
		// decrement's triggers, in that order.
		want = append(want, fmt.Sprintf("order.placed %d", batch(1, 13)[0].ID), "voucher.sold_out v1")
		wantOutbox(t, db, want...)
	})
}

func TestOutboxLifecycle(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		v := createVoucher(t, db, 1, 3)
		payBy := time.Now().Add(time.Hour)
		o := awaiting(t, db, 1, 1, payBy, 1, 2, 3)
		if _, _, err := db.PayOrder(t.Context(), flashsale.Payment{ID: "p1", OrderID: o[0].ID, Amount: v.PayValue}, time.Now()); err != nil {
			t.Fatal(err)
		}
		// Paid again: no second event.
		if _, _, err := db.PayOrder(t.Context(), flashsale.Payment{ID: "p1", OrderID: o[0].ID, Amount: v.PayValue}, time.Now()); err != nil {
			t.Fatal(err)
		}
		// Paying a paid order is refused: nothing written.
		_, _, err := db.PayOrder(t.Context(), flashsale.Payment{ID: "p2", OrderID: o[0].ID, Amount: v.PayValue}, time.Now())
		wantCode(t, err, flashsale.EAlreadyPaid)
		if _, _, err := db.CancelOrder(t.Context(), o[1].ID, 2, time.Now()); err != nil {
			t.Fatal(err)
		}
		expired, err := db.ExpireDue(t.Context(), payBy.Add(time.Second), 10)
		if err != nil || len(expired) != 1 {
			t.Fatalf("ExpireDue = %v, %v", expired, err)
		}
		// The orders' order.placed and the sold out are written by the
		// decrement's triggers, in that order; the other order events at
		// commit, after the voucher's.
		wantOutbox(t, db, fmt.Sprintf("order.placed %d", o[0].ID), fmt.Sprintf("order.placed %d", o[1].ID), fmt.Sprintf("order.placed %d", o[2].ID), "voucher.sold_out v1",
			fmt.Sprintf("order.paid %d", o[0].ID), "voucher.restocked v1", fmt.Sprintf("order.cancelled %d", o[1].ID), fmt.Sprintf("order.expired %d", o[2].ID))
		// A failed order is an event too.
		if err := db.InsertOrder(t.Context(), &flashsale.Order{ID: 99, VoucherID: 1, UserID: 9, Status: flashsale.StatusFailed}, 1); err != nil {
			t.Fatal(err)
		}
		if got := outboxRowsOf(t, db); got[len(got)-1] != "order.failed 99" {
			t.Errorf("last event = %q, want order.failed 99", got[len(got)-1])
		}
	})
}

func TestSequenceEventsAndPrune(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 100)
		for i := range 5 {
			if _, err := db.PersistOrders(t.Context(), batch(1, int64(10+i))); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := db.SequenceEvents(t.Context(), 3); err != nil || n != 3 {
			t.Fatalf("SequenceEvents = %d, %v; want 3", n, err)
		}
		if n, err := db.SequenceEvents(t.Context(), 100); err != nil || n != 2 {
			t.Fatalf("SequenceEvents = %d, %v; want 2", n, err)
		}
		all, err := db.EventsAfter(t.Context(), 0, 100)
		if err != nil || len(all) != 5 {
			t.Fatalf("EventsAfter = %d events, %v", len(all), err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].Pos <= all[i-1].Pos || all[i].Sequence <= all[i-1].Sequence {
				t.Fatalf("events out of order: %+v", all)
			}
		}
		page, err := db.EventsAfter(t.Context(), all[1].Pos, 2)
		if err != nil || len(page) != 2 || page[0].ID != all[2].ID {
			t.Fatalf("EventsAfter(second) = %+v, %v", page, err)
		}
		// A sink at the third event: only what it passed may go, and never
		// the newest.
		now := time.Now()
		if _, ok, err := db.ClaimCursor(t.Context(), "nats", "a", all[2].Pos, now, now.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("ClaimCursor = %v, %v", ok, err)
		}
		if _, ok, err := db.ClaimCursor(t.Context(), "nats", "b", 0, now, now.Add(time.Minute)); err != nil || ok {
			t.Fatalf("ClaimCursor by another owner = %v, %v; want refused", ok, err)
		}
		if n, err := db.PruneEvents(t.Context(), now.Add(time.Hour), 100); err != nil || n != 3 {
			t.Fatalf("PruneEvents = %d, %v; want 3", n, err)
		}
		if ok, err := db.AdvanceCursor(t.Context(), "nats", "a", all[4].Pos, now.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("AdvanceCursor = %v, %v", ok, err)
		}
		if n, err := db.PruneEvents(t.Context(), now.Add(time.Hour), 100); err != nil || n != 1 {
			t.Fatalf("PruneEvents = %d, %v; want 1 (the newest stays)", n, err)
		}
		// Retention: nothing younger than before goes.
		lags, err := db.OutboxLag(t.Context())
		if err != nil || len(lags) != 2 || lags[0].Name != SequenceName || lags[1].Backlog != 0 {
			t.Fatalf("OutboxLag = %+v, %v", lags, err)
		}
		// A new event after pruning gets a new id.
		if _, err := db.PersistOrders(t.Context(), batch(1, 99)); err != nil {
			t.Fatal(err)
		}
		if _, err := db.SequenceEvents(t.Context(), 100); err != nil {
			t.Fatal(err)
		}
		last, err := db.EventsAfter(t.Context(), all[4].Pos, 10)
		if err != nil || len(last) != 1 || last[0].Sequence <= all[4].Sequence || last[0].Pos <= all[4].Pos {
			t.Fatalf("after pruning: %+v, %v", last, err)
		}
	})
}
