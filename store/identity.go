package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
)

// Identity returns the database's identity: a random id that names this
// system of record, the same for every process and every call. The first
// call on a database creates it; concurrent first calls agree on one.
// A Redis prefix is claimed with it (async.ClaimPrefix), so a process
// whose database is not the one the prefix belongs to refuses to start.
func (db *DB) Identity(ctx context.Context) (string, error) {
	id, err := db.readIdentity(ctx)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return id, err
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails
	// The first writer wins; the others' rows are ignored and they read
	// the winner's.
	_, err = db.w.ExecContext(ctx, insertIgnoreVerb(db.dialect)+" system_identity (singleton, id, created_at) VALUES (1, ?, ?)",
		hex.EncodeToString(b), dbTime(now()))
	if err != nil {
		return "", wrap("create the database's identity", err)
	}
	return db.readIdentity(ctx)
}

// readIdentity reads the identity row; sql.ErrNoRows when there is none.
func (db *DB) readIdentity(ctx context.Context) (string, error) {
	var id string
	// The writer: a reader pool (SQLite) may not see a row just written.
	err := db.w.QueryRowContext(ctx, "SELECT id FROM system_identity WHERE singleton = 1").Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	if err != nil {
		return "", wrap("read the database's identity", err)
	}
	return id, nil
}
