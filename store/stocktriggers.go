package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
)

// Migration 00012 (a Go migration: the two dialects' trigger syntaxes
// differ) makes the database write the voucher events itself: an update
// of a voucher that takes its remaining stock from above 0 to 0 writes
// voucher.sold_out, one that gives units back to a voucher at 0 writes
// voucher.restocked, in the updating statement — the transaction of the
// change, at no extra round trip, and inside no lock longer than the
// update's own (docs/events.md). Every path that writes the stock is
// covered: the conditional decrement, the batch and consumer decrements,
// the stock lock's fenced write, returns.

// stockEventsVersion is the migration's version.
const stockEventsVersion = 12

// stockEvent is the INSERT a trigger runs for typ, with now the dialect's
// current UTC time as dbTime writes it.
func stockEvent(typ, now string) string {
	return "INSERT INTO outbox (type, order_id, voucher_id, data, occurred_at) VALUES ('" + typ + "', 0, NEW.id, " +
		"JSON_OBJECT('id', CAST(NEW.id AS CHAR), 'title', NEW.title, 'stock', NEW.stock, 'remaining', NEW.remaining), " + now + ")"
}

// triggerNow is the dialect's current UTC time in a trigger, as dbTime
// writes it.
func triggerNow(dialect string) string {
	if dialect == MySQL {
		return "DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f')"
	}
	return "strftime('%Y-%m-%d %H:%M:%f000', 'now')"
}

// stockTriggers returns the statements that create the triggers.
func stockTriggers(dialect string) []string {
	now := triggerNow(dialect)
	if dialect == MySQL {
		return []string{"CREATE TRIGGER vouchers_stock_events AFTER UPDATE ON vouchers FOR EACH ROW BEGIN " +
			"IF NEW.remaining = 0 AND OLD.remaining > 0 THEN " + stockEvent("voucher.sold_out", now) + "; " +
			"ELSEIF OLD.remaining = 0 AND NEW.remaining > 0 THEN " + stockEvent("voucher.restocked", now) + "; " +
			"END IF; END"}
	}
	return []string{
		"CREATE TRIGGER vouchers_sold_out AFTER UPDATE OF remaining ON vouchers WHEN NEW.remaining = 0 AND OLD.remaining > 0 BEGIN " +
			stockEvent("voucher.sold_out", now) + "; END",
		"CREATE TRIGGER vouchers_restocked AFTER UPDATE OF remaining ON vouchers WHEN OLD.remaining = 0 AND NEW.remaining > 0 BEGIN " +
			stockEvent("voucher.restocked", now) + "; END",
	}
}

// stockEventsMigration returns migration 00012 for the dialect.
func stockEventsMigration(dialect string) *goose.Migration {
	drop := []string{"DROP TRIGGER IF EXISTS vouchers_stock_events", "DROP TRIGGER IF EXISTS vouchers_sold_out", "DROP TRIGGER IF EXISTS vouchers_restocked"}
	return goose.NewGoMigration(stockEventsVersion, &goose.GoFunc{RunTx: execAll(stockEventsVersion, stockTriggers(dialect))}, &goose.GoFunc{RunTx: execAll(stockEventsVersion, drop)})
}

// execAll runs the statements in migration version's transaction.
func execAll(version int, stmts []string) func(ctx context.Context, tx *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		for _, s := range stmts {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return fmt.Errorf("store: migration %d: %w", version, err)
			}
		}
		return nil
	}
}
