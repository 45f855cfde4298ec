package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
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

// MaxBuyerBatch is the most subjects one BuyerNumbers call takes.
const MaxBuyerBatch = 256

// BuyerNumbers is BuyerNumber for many subjects of one issuer at once
// (auth.BuyerStore): their numbers in the order given, each durable
// before it is returned. Two round trips for the lot, whatever their
// count (at most MaxBuyerBatch): one upsert of every pair, then one read
// of their numbers; a lost lock race is tried again, twice.
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
	var err error
	for range 3 {
		if err = db.insertBuyers(ctx, issuer, sorted); err == nil || !isBusy(err) {
			break
		}
	}
	if err != nil {
		return nil, wrap("number buyers", err)
	}
	ids, err := db.readBuyers(ctx, issuer, sorted)
	if err != nil {
		return nil, wrap("read buyers' numbers", err)
	}
	out := make([]int64, len(subjects))
	for i, s := range subjects {
		if out[i] = ids[s]; out[i] <= 0 {
			return nil, fmt.Errorf("store: buyer (%q, %q) numbered but not found", issuer, s)
		}
	}
	return out, nil
}

// insertBuyers numbers the pairs not numbered yet, in one statement. The
// no-op update, not an IGNORE, so that an error (a subject too long) is
// not turned into a warning and a truncated subject.
func (db *DB) insertBuyers(ctx context.Context, issuer string, subjects []string) error {
	q := "INSERT INTO buyer_subjects (issuer, subject, created_at) VALUES (?, ?, ?)" +
		strings.Repeat(", (?, ?, ?)", len(subjects)-1)
	if db.dialect == MySQL {
		q += " ON DUPLICATE KEY UPDATE id = id"
	} else {
		q += " ON CONFLICT (issuer, subject) DO NOTHING"
	}
	at := dbTime(now())
	args := make([]any, 0, 3*len(subjects))
	for _, s := range subjects {
		args = append(args, issuer, s, at)
	}
	_, err := db.w.ExecContext(ctx, q, args...)
	return err
}

// readBuyers reads the numbers of the issuer's subjects, from the writer:
// a reader (SQLite's) may not see the rows just written.
func (db *DB) readBuyers(ctx context.Context, issuer string, subjects []string) (map[string]int64, error) {
	q := "SELECT subject, id FROM buyer_subjects WHERE issuer = ? AND subject IN (?" + strings.Repeat(", ?", len(subjects)-1) + ")"
	args := make([]any, 0, 1+len(subjects))
	args = append(args, issuer)
	for _, s := range subjects {
		args = append(args, s)
	}
	rows, err := db.w.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ids := make(map[string]int64, len(subjects))
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
