package store

import (
	"context"
	"time"

	"github.com/flashsale/flashsale"
)

// RecentVouchers returns at most limit vouchers whose sale ends after
// since, the latest to begin first, without order counts: the vouchers a
// live view watches. It reads the vouchers table only, so it is cheap to
// call every few seconds.
func (db *DB) RecentVouchers(ctx context.Context, since time.Time, limit int) ([]*flashsale.Voucher, error) {
	rows, err := db.r.QueryContext(ctx, "SELECT "+voucherColumns+" FROM vouchers v WHERE v.end_time > ? ORDER BY v.begin_time DESC, v.id DESC LIMIT ?",
		dbTime(since), limit)
	if err != nil {
		return nil, wrap("recent vouchers", err)
	}
	defer rows.Close()
	vs := []*flashsale.Voucher{}
	for rows.Next() {
		v, err := scanVoucher(rows, false)
		if err != nil {
			return nil, wrap("recent vouchers", err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap("recent vouchers", err)
	}
	return vs, nil
}
