package store

import (
	"github.com/pressly/goose/v3"
)

// Migration 00013 (Go, for the triggers' two syntaxes) makes outbox rows
// that hold several events, and lets an order's stock decrement write its
// order.placed:
//
//   - outbox.n: the events of a row. A batch of new orders (the consumer's
//     persist, the batch strategy) is one order.placed row with order_id
//     0 and data the orders' ids, which the readers expand from the orders
//     table (events.go); every other row holds one event. The sequencer
//     gives a row n positions, and an event's sequence and id are its
//     position.
//   - vouchers.placed_order: the order the voucher's last decrement was
//     for (DecrementForOrder, the conditional and lock strategies). The
//     trigger below writes that order's order.placed, as a row of one
//     order id, in the decrementing statement: no round trip of its own,
//     as the stock triggers of 00012 write the voucher events.

// outboxBatchesVersion is the migration's version.
const outboxBatchesVersion = 13

// placedTriggers returns the statements that create the order.placed
// trigger.
func placedTriggers(dialect string) []string {
	insert := func(data, now string) string {
		return "INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at, n) VALUES ('order.placed', 0, NEW.id, " + data + ", " + now + ", 1)"
	}
	if dialect == MySQL {
		// PRECEDES: the order's event before the sold-out its decrement
		// may write, as SQLite fires them (and as they were before).
		return []string{"CREATE TRIGGER vouchers_order_placed AFTER UPDATE ON vouchers FOR EACH ROW PRECEDES vouchers_stock_events BEGIN " +
			"IF NEW.placed_order <> OLD.placed_order THEN " + insert("CONCAT('[', NEW.placed_order, ']')", triggerNow(dialect)) + "; END IF; END"}
	}
	return []string{"CREATE TRIGGER vouchers_order_placed AFTER UPDATE OF placed_order ON vouchers WHEN NEW.placed_order <> OLD.placed_order BEGIN " +
		insert("'[' || NEW.placed_order || ']'", triggerNow(dialect)) + "; END"}
}

// outboxBatchesMigration returns migration 00013 for the dialect.
func outboxBatchesMigration(dialect string) *goose.Migration {
	up := append([]string{
		"ALTER TABLE outbox ADD COLUMN n INT NOT NULL DEFAULT 1",
		"ALTER TABLE vouchers ADD COLUMN placed_order BIGINT NOT NULL DEFAULT 0",
	}, placedTriggers(dialect)...)
	down := []string{
		"DROP TRIGGER IF EXISTS vouchers_order_placed",
		"ALTER TABLE vouchers DROP COLUMN placed_order",
		"ALTER TABLE outbox DROP COLUMN n",
	}
	return goose.NewGoMigration(outboxBatchesVersion, &goose.GoFunc{RunTx: execAll(outboxBatchesVersion, up)}, &goose.GoFunc{RunTx: execAll(outboxBatchesVersion, down)})
}
