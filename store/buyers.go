package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/flashsale/flashsale"
)

// BuyerNumber returns the number of an identity provider's (issuer,
// subject), from 1, numbering it on the first call: the same for good,
// from every process, and different for pairs that differ in any byte
// (BuyerNumbers of one subject).
func (db *DB) BuyerNumber(ctx context.Context, issuer, subject string) (int64, error) {
	ids, err := db.BuyerNumbers(ctx, issuer, []string{subject})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// BuyerSubject returns the (issuer, subject) BuyerNumbers numbered n:
// ENotFound when none was.
func (db *DB) BuyerSubject(ctx context.Context, n int64) (issuer, subject string, err error) {
	err = db.r.QueryRowContext(ctx, "SELECT issuer, subject FROM buyer_subjects WHERE id = ?", n).Scan(&issuer, &subject)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", flashsale.Errorf(flashsale.ENotFound, "no buyer numbered %d", n)
	}
	return issuer, subject, wrap("read a buyer's subject", err)
}

// MaxBuyerBatch is the most subjects one BuyerNumbers call takes.
const MaxBuyerBatch = 256

// BuyerNumbers is BuyerNumber for many subjects of one issuer at once
// (auth.BuyerStore): their numbers in the order given, each durable
// before it is returned, at most MaxBuyerBatch. One round trip for the
// lot on SQLite and MariaDB (from 10.5: the upsert RETURNING the numbers)
// and for one subject on MySQL; two for several on MySQL (one upsert of
// every pair, one read of their numbers). A lost lock race is tried
// again, twice.
func (db *DB) BuyerNumbers(ctx context.Context, issuer string, subjects []string) ([]int64, error) {
	if len(subjects) > MaxBuyerBatch {
		return nil, fmt.Errorf("store: number %d buyers at once; at most %d", len(subjects), MaxBuyerBatch)
	}
	if len(subjects) == 0 {
		return nil, nil
	}
	// Sorted, two processes' upserts take their rows' locks in one order.
	sorted := slices.Clone(subjects)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	ids, err := db.numberAll(ctx, issuer, sorted)
	if err != nil {
		return nil, wrap("number buyers", err)
	}
	out := make([]int64, len(subjects))
	for i, s := range subjects {
		if out[i] = ids[s]; out[i] <= 0 {
			return nil, fmt.Errorf("store: buyer (%q, %q) numbered but not found", issuer, s)
		}
	}
	return out, nil
}

// numberAll runs numberBuyers, again (twice at most) after a lost lock
// race or for subjects its read did not find.
func (db *DB) numberAll(ctx context.Context, issuer string, subjects []string) (map[string]int64, error) {
	ids := map[string]int64{}
	todo := subjects
	var err error
	for range 3 {
		var got map[string]int64
		if got, err = db.numberBuyers(ctx, issuer, todo); err != nil && !isBusy(err) {
			return nil, err
		}
		maps.Copy(ids, got)
		todo = slices.DeleteFunc(slices.Clone(todo), func(s string) bool { return ids[s] > 0 })
		if len(todo) == 0 {
			return ids, nil
		}
	}
	return ids, err
}

// numberBuyers numbers the pairs not numbered yet and returns every
// pair's number. The upserts' no-op updates, not an IGNORE, so that an
// error (a subject too long) is not turned into a warning and a truncated
// subject.
func (db *DB) numberBuyers(ctx context.Context, issuer string, subjects []string) (map[string]int64, error) {
	q := "INSERT INTO buyer_subjects (issuer, subject, created_at) VALUES " + valueRows(len(subjects), 3)
	at := dbTime(now())
	args := make([]any, 0, 3*len(subjects))
	for _, s := range subjects {
		args = append(args, issuer, s, at)
	}
	switch {
	case db.dialect != MySQL:
		return scanBuyers(db.w.QueryContext(ctx, q+" ON CONFLICT (issuer, subject) DO UPDATE SET issuer = excluded.issuer RETURNING subject, id", args...))
	case len(subjects) == 1:
		// LAST_INSERT_ID(id) makes the existing row's id the one the
		// statement reports.
		res, err := db.w.ExecContext(ctx, q+" ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)", args...)
		if err != nil {
			return nil, err
		}
		id, err := res.LastInsertId()
		return map[string]int64{subjects[0]: id}, err
	}
	if db.returning {
		// MariaDB returns every row, those it found too (their no-op
		// update waits for a row another process's upsert holds).
		return scanBuyers(db.w.QueryContext(ctx, q+" ON DUPLICATE KEY UPDATE id = id RETURNING subject, id", args...))
	}
	if _, err := db.w.ExecContext(ctx, q+" ON DUPLICATE KEY UPDATE id = id", args...); err != nil {
		return nil, err
	}
	args = append(args[:0], issuer)
	for _, s := range subjects {
		args = append(args, s)
	}
	// A locking read: it reads the latest rows, and waits for a row another
	// process's upsert holds, rather than reading a snapshot that may not
	// show it yet (CI saw one subject missing once under concurrent batches).
	return scanBuyers(db.w.QueryContext(ctx, "SELECT subject, id FROM buyer_subjects WHERE issuer = ? AND subject IN "+placeholders(len(subjects))+" LOCK IN SHARE MODE", args...))
}

// scanBuyers reads (subject, id) rows.
func scanBuyers(rows *sql.Rows, err error) (map[string]int64, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := map[string]int64{}
	for rows.Next() {
		var s string
		var id int64
		if err := rows.Scan(&s, &id); err != nil {
			return nil, err
		}
		ids[s] = id
	}
	return ids, rows.Err()
}
