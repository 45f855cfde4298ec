package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/flashsale/flashsale"
)

// CreateVoucher stores v with its whole stock remaining. Unlike
// flashsale.VoucherService, it does not assign the ID: the caller sets v.ID
// from the ID generator (EInvalid when it is not positive), and an ID that
// is taken gives an error wrapping ErrDuplicateID. It validates v, and sets
// v.Remaining, v.CreatedAt and v's times to what was stored (UTC,
// microseconds).
func (db *DB) CreateVoucher(ctx context.Context, v *flashsale.Voucher) error {
	if v.ID <= 0 {
		return flashsale.Errorf(flashsale.EInvalid, "voucher id must be positive, got %d", v.ID)
	}
	if err := v.Validate(); err != nil {
		return err
	}
	created := now()
	_, err := db.w.ExecContext(ctx, `INSERT INTO vouchers
		(id, title, pay_value, actual_value, stock, remaining, shards, payment_window_seconds, limit_per_buyer, admission, admit_per_second, begin_time, end_time, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		v.ID, v.Title, v.PayValue, v.ActualValue, v.Stock, v.Stock, v.ShardCount(), v.PaymentWindowSeconds, v.BuyerLimit(), admission(v), v.AdmitPerSecond,
		dbTime(v.BeginTime), dbTime(v.EndTime), dbTime(created), dbTime(created))
	if isDuplicate(err) {
		return fmt.Errorf("%w: voucher %d already exists", ErrDuplicateID, v.ID)
	}
	if err != nil {
		return wrap(fmt.Sprintf("create voucher %d", v.ID), err)
	}
	v.Remaining, v.Orders, v.Shards, v.LimitPerBuyer, v.Admission = v.Stock, 0, v.ShardCount(), v.BuyerLimit(), admission(v)
	v.BeginTime, v.EndTime, v.CreatedAt = storedTime(v.BeginTime), storedTime(v.EndTime), created
	return nil
}

// admission returns v's admission mode, open when not given.
func admission(v *flashsale.Voucher) string {
	if v.Admission == "" {
		return flashsale.AdmissionOpen
	}
	return v.Admission
}

// voucherColumns are the columns scanVoucher reads, in order.
const voucherColumns = "v.id, v.title, v.pay_value, v.actual_value, v.stock, v.remaining, v.shards, v.payment_window_seconds, v.limit_per_buyer, v.admission, v.admit_per_second, v.begin_time, v.end_time, v.created_at"

// createdOrders is a voucher's count of live orders, as a column of a
// query on vouchers v: kept in its row (countLive), never counted from
// orders on a read.
const createdOrders = "v.live_orders"

// countLive adds n (negative: takes) to the voucher's count of live
// orders: every transaction that makes an order live or closes it does,
// as it adds to or takes from buyer_units, after it locked the voucher's
// row or before it locks buyers' (one lock order: vouchers, then buyers).
func (tx *Tx) countLive(ctx context.Context, voucherID int64, n int) error {
	_, err := tx.w.ExecContext(ctx, "UPDATE vouchers SET live_orders = live_orders + ? WHERE id = ?", n, voucherID)
	return wrap(fmt.Sprintf("count the live orders of voucher %d", voucherID), err)
}

// scanVoucher reads voucherColumns and, when withOrders, an order count.
func scanVoucher(row interface{ Scan(...any) error }, withOrders bool) (*flashsale.Voucher, error) {
	v := new(flashsale.Voucher)
	dest := []any{&v.ID, &v.Title, &v.PayValue, &v.ActualValue, &v.Stock, &v.Remaining, &v.Shards, &v.PaymentWindowSeconds, &v.LimitPerBuyer, &v.Admission, &v.AdmitPerSecond,
		scanTime{&v.BeginTime}, scanTime{&v.EndTime}, scanTime{&v.CreatedAt}}
	if withOrders {
		dest = append(dest, &v.Orders)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	return v, nil
}

// FindVoucher returns the voucher with its remaining stock and, in Orders,
// the number of its live orders (kept in its row), or ENotFound.
func (db *DB) FindVoucher(ctx context.Context, id int64) (*flashsale.Voucher, error) {
	row := db.r.QueryRowContext(ctx, "SELECT "+voucherColumns+", "+createdOrders+" FROM vouchers v WHERE v.id = ?", id)
	v, err := scanVoucher(row, true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, voucherNotFound(id)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("find voucher %d", id), err)
	}
	return v, nil
}

// ListVouchers returns every voucher, by id, with its order count as in
// FindVoucher.
func (db *DB) ListVouchers(ctx context.Context) ([]*flashsale.Voucher, error) {
	return db.queryVouchers(ctx, "list vouchers", true, "SELECT "+voucherColumns+", "+createdOrders+" FROM vouchers v ORDER BY v.id")
}

// FindVouchers returns up to limit vouchers, newest (highest id) first,
// with their order counts as in FindVoucher. With before > 0 it returns
// only ids below it: passing the last id of one page gives the next page,
// unchanged by vouchers created meanwhile (keyset pagination on the primary
// key, so each page is one index range scan). EInvalid when limit is not
// positive.
func (db *DB) FindVouchers(ctx context.Context, before int64, limit int) ([]*flashsale.Voucher, error) {
	if limit <= 0 {
		return nil, flashsale.Errorf(flashsale.EInvalid, "limit must be positive, got %d", limit)
	}
	if before <= 0 {
		before = math.MaxInt64 // every id is below it: the first page
	}
	return db.queryVouchers(ctx, "find vouchers", true, "SELECT "+voucherColumns+", "+createdOrders+
		" FROM vouchers v WHERE v.id < ? ORDER BY v.id DESC LIMIT ?", before, limit)
}

// RecentVouchers returns at most limit vouchers whose sale ends after
// since, the latest to begin first, without order counts: the vouchers a
// live view watches. It reads the vouchers table only, so it is cheap to
// call every few seconds.
func (db *DB) RecentVouchers(ctx context.Context, since time.Time, limit int) ([]*flashsale.Voucher, error) {
	return db.queryVouchers(ctx, "recent vouchers", false, "SELECT "+voucherColumns+
		" FROM vouchers v WHERE v.end_time > ? ORDER BY v.begin_time DESC, v.id DESC LIMIT ?", dbTime(since), limit)
}

// queryVouchers runs a query of voucherColumns and, when withOrders, an
// order count; op names it in errors.
func (db *DB) queryVouchers(ctx context.Context, op string, withOrders bool, query string, args ...any) ([]*flashsale.Voucher, error) {
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrap(op, err)
	}
	defer rows.Close()
	vs := []*flashsale.Voucher{}
	for rows.Next() {
		v, err := scanVoucher(rows, withOrders)
		if err != nil {
			return nil, wrap(op, err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, wrap(op, err)
	}
	return vs, nil
}

// Voucher returns the voucher's row, with Orders left at 0, or ENotFound:
// one primary key read, for checking the sale window on every request.
func (q Queries) Voucher(ctx context.Context, id int64) (*flashsale.Voucher, error) {
	v, err := scanVoucher(q.r.QueryRowContext(ctx, "SELECT "+voucherColumns+" FROM vouchers v WHERE v.id = ?", id), false)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, voucherNotFound(id)
	}
	if err != nil {
		return nil, wrap(fmt.Sprintf("voucher %d", id), err)
	}
	return v, nil
}

// VoucherSnapshot returns the voucher's row (Orders left at 0), its live
// orders (that hold stock) and its closed orders whose returns are pending,
// read in one transaction so they are one snapshot: the remaining stock,
// the orders that took the rest, and those whose units it counts already
// but a gate's stock may not. It returns ENotFound when the voucher does
// not exist.
func (db *DB) VoucherSnapshot(ctx context.Context, id int64) (*flashsale.Voucher, []flashsale.Order, error) {
	var v *flashsale.Voucher
	var orders []flashsale.Order
	err := db.Tx(ctx, func(tx *Tx) error {
		var err error
		if v, err = tx.Voucher(ctx, id); err != nil {
			return err
		}
		orders, err = tx.ordersOf(ctx, id, liveOrders+" OR return_pending = 1")
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return v, orders, nil
}

// ReloadSnapshot returns what the async gate reloads a voucher from, read
// in one transaction so it is one snapshot: the voucher's row (Orders
// left at 0); its live orders, its closed orders whose returns are
// pending, and its orders among stream (the ids in its Redis stream)
// whatever their status; and, as keyed, its orders placed with an
// idempotency key, whatever their status. ENotFound when the voucher does
// not exist.
func (db *DB) ReloadSnapshot(ctx context.Context, id int64, stream []int64) (v *flashsale.Voucher, orders, keyed []flashsale.Order, err error) {
	err = db.Tx(ctx, func(tx *Tx) error {
		if v, err = tx.Voucher(ctx, id); err != nil {
			return err
		}
		if orders, err = tx.ordersOf(ctx, id, liveOrders+" OR return_pending = 1"); err != nil {
			return err
		}
		have := map[int64]bool{}
		for _, o := range orders {
			have[o.ID] = true
		}
		for chunk := range slices.Chunk(stream, persistChunk) {
			args := make([]any, len(chunk))
			for i, id := range chunk {
				args[i] = id
			}
			streamed, err := tx.ordersOf(ctx, id, "id IN "+placeholders(len(chunk)), args...)
			if err != nil {
				return err
			}
			for _, o := range streamed {
				if !have[o.ID] {
					orders = append(orders, o)
				}
			}
		}
		keyed, err = tx.ordersOf(ctx, id, "idempotency_key IS NOT NULL")
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return v, orders, keyed, nil
}

// DeleteVoucherWithoutOrders deletes a voucher that has no orders: the undo
// of a CreateVoucher whose voucher could not be made sellable. It returns
// ENotFound when there is no such voucher without orders.
func (db *DB) DeleteVoucherWithoutOrders(ctx context.Context, id int64) error {
	op := fmt.Sprintf("delete voucher %d", id)
	res, err := db.w.ExecContext(ctx, "DELETE FROM vouchers WHERE id = ? AND NOT EXISTS (SELECT 1 FROM orders WHERE voucher_id = ?)", id, id)
	if err != nil {
		return wrap(op, err)
	}
	if ok, err := oneRow(res, op); err != nil {
		return err
	} else if !ok {
		return flashsale.Errorf(flashsale.ENotFound, "voucher %d without orders not found", id)
	}
	return nil
}
