package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/pressly/goose/v3"
)

// migrations holds the schema: one set of files for both dialects.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrateLockTimeout bounds how long Open waits for another process that is
// migrating the same MySQL database.
const migrateLockTimeout = 60 * time.Second

// migrate applies the pending migrations to db, serialised with every other
// Open of the same database: goose's Up first checks for pending migrations
// without its own lock (creating its version table if missing), so the lock
// must cover all of Up, not only the part goose locks.
func migrate(ctx context.Context, db *sql.DB, dialect string) (err error) {
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	gooseDialect := goose.DialectSQLite3
	if dialect == MySQL {
		gooseDialect = goose.DialectMySQL
	}
	p, err := goose.NewProvider(gooseDialect, db, fsys,
		goose.WithDisableGlobalRegistry(true), goose.WithLogger(goose.NopLogger()),
		goose.WithGoMigrations(stockEventsMigration(dialect), outboxBatchesMigration(dialect), oneTriggerMigration(dialect), placedOnInsertMigration(dialect)))
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	if dialect == MySQL { // SQLite: Open holds sqliteOpening
		unlock, err := lockMySQL(ctx, db)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, unlock()) }()
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// lockName is the SQL expression of the migration lock's name. It is
// derived from the database name, so migrations of other databases on the
// same server do not wait; MD5 keeps it under MySQL's 64-character limit.
const lockName = "CONCAT('flashsale:migrate:', MD5(DATABASE()))"

// lockMySQL takes the database's migration lock, a MySQL named lock held by
// a connection set aside from db (which is why a MySQL pool needs two
// connections). The server releases a named lock when its connection ends,
// so a process that dies while migrating never leaves the database locked.
// The returned function releases the lock.
func lockMySQL(ctx context.Context, db *sql.DB) (func() error, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migration lock: %w", err)
	}
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", ?)", int(migrateLockTimeout.Seconds())).Scan(&got)
	if err == nil && (!got.Valid || got.Int64 != 1) {
		err = fmt.Errorf("another process has been migrating for over %s", migrateLockTimeout)
	}
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("store: migration lock: %w", err)
	}
	return func() error {
		_, err := conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK("+lockName+")")
		if err != nil {
			// Do not pool a connection that may still hold the lock:
			// ErrBadConn makes database/sql close it, which frees the lock.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			err = fmt.Errorf("store: migration unlock: %w", err)
		}
		return errors.Join(err, conn.Close())
	}, nil
}
