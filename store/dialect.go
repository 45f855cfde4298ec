package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/go-sql-driver/mysql"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Everything that differs between MySQL/MariaDB and SQLite, apart from the
// connection setup in url.go, is in this file.

// insertIgnoreVerb returns the verb of an insert that skips rows clashing
// with a primary or unique key instead of failing.
func insertIgnoreVerb(dialect string) string {
	if dialect == MySQL {
		return "INSERT IGNORE INTO"
	}
	return "INSERT OR IGNORE INTO"
}

// MySQL and MariaDB error numbers.
const (
	mysqlDuplicateKey     = 1062
	mysqlLockWaitTimeout  = 1205
	mysqlDeadlock         = 1213
	mysqlRecordChanged    = 1020 // MariaDB innodb_snapshot_isolation (on by default from 11.6.2)
	mysqlUnknownDatabase  = 1049
	mysqlCheckViolated    = 3819 // MySQL 8
	mariadbCheckViolated  = 4025 // MariaDB: CONSTRAINT `x` failed
	sqliteExtendedCodeLow = 0xff // the primary result code of an extended one
)

// isDuplicate reports whether err is a primary or unique key violation.
func isDuplicate(err error) bool {
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		return me.Number == mysqlDuplicateKey
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// isCheckViolation reports whether err is a CHECK constraint violation.
func isCheckViolation(err error) bool {
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		return me.Number == mysqlCheckViolated || me.Number == mariadbCheckViolated
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK
	}
	return false
}

// isBusy reports whether err means the statement lost a race for a lock
// (a deadlock, a lock wait timeout, SQLITE_BUSY or SQLITE_LOCKED) and the
// whole transaction may succeed if tried again.
func isBusy(err error) bool {
	if me, ok := errors.AsType[*mysql.MySQLError](err); ok {
		return me.Number == mysqlDeadlock || me.Number == mysqlLockWaitTimeout || me.Number == mysqlRecordChanged
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		primary := se.Code() & sqliteExtendedCodeLow
		return primary == sqlite3.SQLITE_BUSY || primary == sqlite3.SQLITE_LOCKED
	}
	return false
}

// isUnknownDatabase reports whether err says the MySQL database is missing.
func isUnknownDatabase(err error) bool {
	me, ok := errors.AsType[*mysql.MySQLError](err)
	return ok && me.Number == mysqlUnknownDatabase
}

// isUnreachable reports whether err says the database server could not be
// reached, or the connection to it broke.
func isUnreachable(err error) bool {
	_, netErr := errors.AsType[*net.OpError](err)
	return netErr || errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// wrap prefixes err with the operation and adds a *flashsale.Error to the
// chain so the caller answers "try again" instead of an internal error:
// EBusy for a lost lock race, EUnavailable (with a Retry-After) when the
// database cannot be reached. The driver error stays in the chain.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*flashsale.Error](err); ok {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	switch {
	case isBusy(err):
		return fmt.Errorf("store: %s: %w: %w", op, flashsale.Errorf(flashsale.EBusy, "the database is busy, try again"), err)
	case isUnreachable(err):
		unavailable := &flashsale.Error{Code: flashsale.EUnavailable, Message: "the database is unavailable; try again shortly", RetryAfter: time.Second}
		return fmt.Errorf("store: %s: %w: %w", op, unavailable, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// timeLayout is how times are written: UTC with exactly six fractional
// digits. MySQL parses it into DATETIME(6); SQLite stores it as text that
// sorts in time order and that its date functions understand.
const timeLayout = "2006-01-02 15:04:05.000000"

// dbTime returns t as the store writes it.
func dbTime(t time.Time) string {
	return t.UTC().Format(timeLayout)
}

// storedTime returns t as it reads back from the store: UTC, truncated to
// microseconds.
func storedTime(t time.Time) time.Time {
	return t.UTC().Truncate(flashsale.TimePrecision)
}

// now returns the current time as the store keeps it.
func now() time.Time {
	return storedTime(time.Now())
}

// scanTime is a sql.Scanner for a DATETIME(6) column: MySQL returns a
// time.Time (parseTime=true, loc=UTC), modernc SQLite the text dbTime wrote.
type scanTime struct{ t *time.Time }

// Scan implements sql.Scanner.
func (s scanTime) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case time.Time:
		*s.t = v.UTC()
		return nil
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return fmt.Errorf("store: cannot read %T as a time", src)
	}
	t, err := time.ParseInLocation(timeLayout, text, time.UTC)
	if err != nil {
		return fmt.Errorf("store: reading time: %w", err)
	}
	*s.t = t
	return nil
}

// scanNullTime is scanTime for a nullable column: NULL reads as the zero
// time.
type scanNullTime struct{ t *time.Time }

// Scan implements sql.Scanner.
func (s scanNullTime) Scan(src any) error {
	if src == nil {
		*s.t = time.Time{}
		return nil
	}
	return scanTime(s).Scan(src)
}

// nullTime returns t as the store writes it, or NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return dbTime(t)
}

// nullString returns s, or NULL for "".
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// upsertAdding returns the clause that ends an INSERT into buyer_units so
// that a row already present gets the new row's units added instead.
func upsertAdding(dialect string) string {
	if dialect == MySQL {
		return " ON DUPLICATE KEY UPDATE units = units + VALUES(units)"
	}
	return " ON CONFLICT (voucher_id, user_id) DO UPDATE SET units = units + excluded.units"
}

// skipLocked returns what ends a locking SELECT that passes over rows
// another transaction holds: SKIP LOCKED on MySQL (MariaDB 10.6, MySQL
// 8.0), nothing on SQLite, where no other transaction holds any.
func skipLocked(dialect string) string {
	if dialect == MySQL {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// forUpdate returns what ends a SELECT that locks the rows it reads until
// the transaction ends: FOR UPDATE on MySQL, nothing on SQLite, whose
// transactions hold the database's write lock from BEGIN.
func forUpdate(dialect string) string {
	if dialect == MySQL {
		return " FOR UPDATE"
	}
	return ""
}

// insertReturning reports whether the server takes INSERT … RETURNING:
// SQLite does, and MariaDB from 10.5 (its VERSION() names it); MySQL does
// not.
func insertReturning(ctx context.Context, db *sql.DB, dialect string) (bool, error) {
	if dialect != MySQL {
		return true, nil
	}
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return false, wrap("read the server's version", err)
	}
	return mariaDBReturning(v), nil
}

// mariaDBReturning reports whether VERSION() v is MariaDB's from 10.5.
func mariaDBReturning(v string) bool {
	if !strings.Contains(v, "MariaDB") {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 10 || major == 10 && minor >= 5
}
