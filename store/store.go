// Package store keeps vouchers and orders in SQL: MariaDB/MySQL, the system
// of record, or embedded SQLite for trying things out. One set of statements
// and migrations serves both; the few dialect differences are in dialect.go
// and url.go.
//
// Every statement uses placeholders. Times are stored and returned in UTC
// with microsecond precision. Counts and stock are read from the tables,
// never cached.
//
// DB does not implement flashsale.VoucherService on its own: CreateVoucher
// stores the ID the caller assigned (from the ID generator) instead of
// assigning one.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
	_ "modernc.org/sqlite"             // the "sqlite" driver
)

// Sentinel errors.
var (
	// ErrBadURL is wrapped by Open for a URL it does not understand.
	ErrBadURL = errors.New("store: bad database URL")
	// ErrDuplicateID is wrapped by CreateVoucher when the ID is taken.
	ErrDuplicateID = errors.New("store: duplicate id")
)

// querier is what Queries runs statements on: *sql.DB or *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Queries holds the statements that run either on their own (autocommit,
// via DB) or inside a transaction (via Tx). Both DB and Tx embed it.
type Queries struct {
	r querier // reads
	w querier // writes
}

// DB is an open, migrated database. It is safe for concurrent use.
type DB struct {
	Queries
	dialect string
	writer  *sql.DB
	// reader is SQLite's query-only pool for files; nil when writer serves
	// reads too.
	reader *sql.DB
	// noOutbox: transactions write no events (WithoutOutbox).
	noOutbox bool
	// returning: the server takes INSERT … RETURNING (SQLite, MariaDB
	// from 10.5; not MySQL).
	returning bool
}

// Tx is a transaction started by DB.Tx. Its Queries methods run inside it.
type Tx struct {
	Queries
	dialect string
	// events are the outbox rows of the transaction's changes, written
	// just before it commits (outbox.go), unless noOutbox.
	events   outboxRows
	noOutbox bool
	// liveCounted are the orders PlaceOrder inserts, whose decrement
	// counts them live and whose order.placed a trigger writes.
	liveCounted map[int64]bool
}

var (
	_ querier = (*sql.DB)(nil)
	_ querier = (*sql.Tx)(nil)
	_ error   = (*StockShortError)(nil)
	_ error   = (*UnknownVoucherError)(nil)
)

// Open connects to the database at url, checks it is reachable and applies
// pending migrations. It accepts mysql://user:pass@host:port/name[?params]
// (the database must exist), sqlite:///absolute/path/file.db,
// sqlite://relative/path/file.db and sqlite::memory:. Several processes
// may Open one MySQL database at once. The params, pools and SQLite's
// connections: DESIGN.md.
func Open(ctx context.Context, url string) (*DB, error) {
	c, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	if c.dialect == SQLite {
		sqliteOpening.Lock()
		defer sqliteOpening.Unlock()
	}
	db := &DB{dialect: c.dialect}
	db.writer, err = c.open(ctx, c.dsn)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, db.writer, c.dialect); err != nil {
		db.writer.Close()
		return nil, err
	}
	db.Queries = Queries{r: db.writer, w: db.writer}
	if db.returning, err = insertReturning(ctx, db.writer, c.dialect); err != nil {
		db.writer.Close()
		return nil, err
	}
	if c.readDSN != "" {
		reader, err := c.open(ctx, c.readDSN)
		if err != nil {
			db.writer.Close()
			return nil, err
		}
		reader.SetMaxOpenConns(sqliteReaders)
		reader.SetMaxIdleConns(sqliteReaders)
		db.reader = reader
		db.Queries.r = reader
	}
	return db, nil
}

// sqliteOpening serialises the Opens of SQLite databases in this process.
// A SQLite file belongs to one process, and within it two Opens of one new
// file must neither both create the tables nor both switch it to WAL (which
// can fail with SQLITE_BUSY without waiting for the busy timeout).
var sqliteOpening sync.Mutex

// open opens one pool and checks the server answers.
func (c *config) open(ctx context.Context, dsn string) (*sql.DB, error) {
	sdb, err := sql.Open(c.dialect, dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", c.dialect, err)
	}
	sdb.SetMaxOpenConns(c.maxOpen)
	sdb.SetMaxIdleConns(c.maxIdle)
	sdb.SetConnMaxLifetime(c.maxLifetime)
	if err := sdb.PingContext(ctx); err != nil {
		sdb.Close()
		if isUnknownDatabase(err) {
			return nil, fmt.Errorf("store: database %q does not exist on %s; create it first (the store creates tables, not databases): %w", c.databaseName, c.host, err)
		}
		return nil, wrap(fmt.Sprintf("connect to %s database %q", c.dialect, c.databaseName), err)
	}
	return sdb, nil
}

// Close closes the connection pools.
func (db *DB) Close() error {
	err := db.writer.Close()
	if db.reader != nil {
		err = errors.Join(err, db.reader.Close())
	}
	return err
}

// Ping checks the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.writer.PingContext(ctx); err != nil {
		return wrap("ping", err)
	}
	if db.reader != nil {
		return wrap("ping", db.reader.PingContext(ctx))
	}
	return nil
}

// Dialect returns "mysql" or "sqlite".
func (db *DB) Dialect() string { return db.dialect }

// Tx runs fn in a transaction. It commits when fn returns nil, and rolls
// back when fn returns an error (which Tx returns unchanged) or panics (the
// panic goes on after the rollback). Inside fn use tx, not db, and keep fn
// short (on SQLite a db call from fn waits for it: DESIGN.md).
func (db *DB) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	sqlTx, err := db.writer.BeginTx(ctx, nil)
	if err != nil {
		return wrap("begin", err)
	}
	committed := false
	defer func() {
		if !committed {
			// The error of a rollback after a failure adds nothing useful:
			// the server discards the transaction when the connection goes.
			_ = sqlTx.Rollback()
		}
	}()
	tx := &Tx{Queries: Queries{r: sqlTx, w: sqlTx}, dialect: db.dialect, noOutbox: db.noOutbox}
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.writeEvents(ctx); err != nil {
		return err
	}
	committed = true
	return wrap("commit", sqlTx.Commit())
}
