package store

import "context"

// BuyerNumber returns the number of an identity provider's (issuer,
// subject), from 1, numbering it on the first call: the same for good,
// from every process, and different for pairs that differ in any byte
// (auth.BuyerStore). One round trip.
func (db *DB) BuyerNumber(ctx context.Context, issuer, subject string) (int64, error) {
	if db.dialect == MySQL {
		// LAST_INSERT_ID(id) makes the existing row's id the one the
		// statement reports.
		res, err := db.w.ExecContext(ctx, "INSERT INTO buyer_subjects (issuer, subject, created_at) VALUES (?, ?, ?)"+
			" ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)", issuer, subject, dbTime(now()))
		if err != nil {
			return 0, wrap("number a buyer", err)
		}
		id, err := res.LastInsertId()
		return id, wrap("number a buyer", err)
	}
	var id int64
	err := db.w.QueryRowContext(ctx, "INSERT INTO buyer_subjects (issuer, subject, created_at) VALUES (?, ?, ?)"+
		" ON CONFLICT (issuer, subject) DO UPDATE SET issuer = excluded.issuer RETURNING id", issuer, subject, dbTime(now())).Scan(&id)
	return id, wrap("number a buyer", err)
}
