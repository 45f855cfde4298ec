package store

import (
	"github.com/pressly/goose/v3"
)

// Migration 00013 (Go, for the triggers' two syntaxes) makes outbox rows
// that hold several events, and lets the stock decrement that places
// orders write their order.placed:
//
//   - outbox.n: the events of a row. The order.placed events of the
//     orders one decrement placed are one row with order_id 0 and data
//     the orders' ids (appendIDs), which the readers expand from the
//     orders table (events.go); every other row holds one event. The
//     sequencer gives a row n positions, and an event's sequence and id
//     are its position.
//   - vouchers.placed_orders: the ids of the orders the voucher's last
//     placing decrement was for (PlaceOrder for the conditional
//     and lock strategies; the batch strategy's and the consumer's
//     decrement, one per voucher of a batch). The trigger below copies
//     them into the outbox in the decrementing statement: no round trip
//     of its own, as the stock triggers of 00012 write the voucher events.

// outboxBatchesVersion is the migration's version.
const outboxBatchesVersion = 13

// placedTriggers returns the statements that create the order.placed
// trigger.
func placedTriggers(dialect string) []string {
	insert := "INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at, n) VALUES ('order.placed', 0, NEW.id, NEW.placed_orders, " +
		triggerNow(dialect) + ", LENGTH(NEW.placed_orders) - LENGTH(REPLACE(NEW.placed_orders, ',', '')) + 1)"
	if dialect == MySQL {
		// PRECEDES: the orders' event before the sold-out their decrement
		// may write, as SQLite fires them.
		return []string{"CREATE TRIGGER vouchers_order_placed AFTER UPDATE ON vouchers FOR EACH ROW PRECEDES vouchers_stock_events BEGIN " +
			"IF NEW.placed_orders <> OLD.placed_orders THEN " + insert + "; END IF; END"}
	}
	return []string{"CREATE TRIGGER vouchers_order_placed AFTER UPDATE OF placed_orders ON vouchers WHEN NEW.placed_orders <> OLD.placed_orders BEGIN " +
		insert + "; END"}
}

// outboxBatchesMigration returns migration 00013 for the dialect.
func outboxBatchesMigration(dialect string) *goose.Migration {
	up := append([]string{
		"ALTER TABLE outbox ADD COLUMN n INT NOT NULL DEFAULT 1",
		"ALTER TABLE vouchers ADD COLUMN placed_orders TEXT NOT NULL DEFAULT ''",
	}, placedTriggers(dialect)...)
	down := []string{
		"DROP TRIGGER IF EXISTS vouchers_order_placed",
		"ALTER TABLE vouchers DROP COLUMN placed_orders",
		"ALTER TABLE outbox DROP COLUMN n",
	}
	return goose.NewGoMigration(outboxBatchesVersion, &goose.GoFunc{RunTx: execAll(outboxBatchesVersion, up)}, &goose.GoFunc{RunTx: execAll(outboxBatchesVersion, down)})
}

// Migration 00014 (MySQL only; SQLite keeps its triggers) makes the
// vouchers' two AFTER UPDATE triggers one, and has it write the row's
// time as UTC_TIMESTAMP(6) itself rather than formatted as a string. The
// trigger runs inside the hot voucher's row lock on every decrement (the
// conditional and lock strategies, one per order), so what it costs is
// paid once per order by every waiting buyer: one trigger invoked instead
// of two, and no string round trip of the time, take a few to 20 µs of
// server CPU off each decrement, outbox on or off (docs/benchmarks.md,
// issue 35, helper i35s). The events, their order (an order.placed before
// the sold-out its decrement may write) and their columns are the same.

// oneTriggerVersion is the migration's version.
const oneTriggerVersion = 14

// oneVoucherTrigger returns the statement that creates the one trigger.
func oneVoucherTrigger() string {
	now := "UTC_TIMESTAMP(6)"
	stock := func(typ string) string {
		return "INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at) VALUES ('" + typ + "', 0, NEW.id, " +
			"JSON_OBJECT('id', CAST(NEW.id AS CHAR), 'title', NEW.title, 'stock', NEW.stock, 'remaining', NEW.remaining), " + now + ")"
	}
	return "CREATE TRIGGER vouchers_events AFTER UPDATE ON vouchers FOR EACH ROW BEGIN " +
		"IF NEW.placed_orders <> OLD.placed_orders THEN " +
		"INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at, n) VALUES ('order.placed', 0, NEW.id, NEW.placed_orders, " + now + ", " +
		"LENGTH(NEW.placed_orders) - LENGTH(REPLACE(NEW.placed_orders, ',', '')) + 1); END IF; " +
		"IF NEW.remaining = 0 AND OLD.remaining > 0 THEN " + stock("voucher.sold_out") + "; " +
		"ELSEIF OLD.remaining = 0 AND NEW.remaining > 0 THEN " + stock("voucher.restocked") + "; " +
		"END IF; END"
}

// oneTriggerMigration returns migration 00014 for the dialect.
func oneTriggerMigration(dialect string) *goose.Migration {
	var up, down []string
	if dialect == MySQL {
		up = []string{"DROP TRIGGER IF EXISTS vouchers_order_placed", "DROP TRIGGER IF EXISTS vouchers_stock_events", oneVoucherTrigger()}
		down = append([]string{"DROP TRIGGER IF EXISTS vouchers_events"}, stockTriggers(dialect)...)
		down = append(down, placedTriggers(dialect)...)
	}
	return goose.NewGoMigration(oneTriggerVersion, &goose.GoFunc{RunTx: execAll(oneTriggerVersion, up)}, &goose.GoFunc{RunTx: execAll(oneTriggerVersion, down)})
}

// Migration 00015 (MySQL only) writes the order.placed of an order
// PlaceOrder places from a trigger on its insert, not on the voucher's
// decrement: the insert comes before the decrement, so the outbox row is
// written before the transaction takes the hot voucher's row lock, and
// the lock is held for the decrement and COMMIT alone (issue 35: the row
// written inside the lock cost conditional and lock 5-15% of their
// orders/s). PlaceOrder's INSERT names the order in the session variable
// @flashsale_placed as it inserts it (InsertOrder); the trigger writes
// the event of that order only, so a batch's multi-row INSERT, whose
// order.placed is the decrement's one row, writes none. The variable is
// cleared once used (by the trigger, or by InsertOrder when the insert
// failed), though an id is inserted once at most anyway. The event row
// is the decrement's of one order: same type, data and count. Its id,
// and its occurred_at, are taken at the insert, before the wait for the
// voucher's row: the sequencer orders rows as they commit (events.go),
// so an order.placed may come before the voucher.restocked of the
// cancel that gave back its unit — events of two keys, between which no
// order is promised (docs/events.md). Migrate down only after every
// instance runs a version without this migration: a newer one writes
// PlaceOrder's event only through this trigger.

// placedOnInsertVersion is the migration's version.
const placedOnInsertVersion = 15

// placedOnInsertMigration returns migration 00015 for the dialect.
func placedOnInsertMigration(dialect string) *goose.Migration {
	var up, down []string
	if dialect == MySQL {
		up = []string{"CREATE TRIGGER orders_placed AFTER INSERT ON orders FOR EACH ROW BEGIN " +
			"IF NEW.id = @flashsale_placed THEN " +
			"INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at, n) VALUES ('order.placed', 0, NEW.voucher_id, CONCAT('[', NEW.id, ']'), UTC_TIMESTAMP(6), 1); " +
			"SET @flashsale_placed = NULL; END IF; END"}
		down = []string{"DROP TRIGGER IF EXISTS orders_placed"}
	}
	return goose.NewGoMigration(placedOnInsertVersion, &goose.GoFunc{RunTx: execAll(placedOnInsertVersion, up)}, &goose.GoFunc{RunTx: execAll(placedOnInsertVersion, down)})
}
