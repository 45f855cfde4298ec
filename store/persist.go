package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flashsale/flashsale"
)

// StockShortError is returned by PersistOrders when a voucher has less stock
// than the batch's new orders take from it. It wraps flashsale.ErrStockShort.
type StockShortError struct {
	VoucherID int64
	Remaining int
	Needed    int
}

// Error implements the error interface.
func (e *StockShortError) Error() string {
	return fmt.Sprintf("store: stock short: voucher %d has %d left, the batch needs %d", e.VoucherID, e.Remaining, e.Needed)
}

// Unwrap returns flashsale.ErrStockShort.
func (e *StockShortError) Unwrap() error { return flashsale.ErrStockShort }

// UnknownVoucherError is returned by PersistOrders when a batch's voucher
// does not exist in this database. It wraps flashsale.ErrUnknownVoucher.
type UnknownVoucherError struct {
	VoucherID int64
	Needed    int
}

// Error implements the error interface.
func (e *UnknownVoucherError) Error() string {
	return fmt.Sprintf("store: voucher %d does not exist in this database, %d orders need it", e.VoucherID, e.Needed)
}

// Unwrap returns flashsale.ErrUnknownVoucher.
func (e *UnknownVoucherError) Unwrap() error { return flashsale.ErrUnknownVoucher }

// persistChunk bounds the rows of one statement, well under the placeholder
// limits of both dialects (65535 in MySQL, 32766 in SQLite).
const persistChunk = 500

// persistAttempts bounds the retries of a batch that raced another writer.
const persistAttempts = 3

// errRaced says another transaction stored some of the batch's orders
// between the lookup and the insert; the batch is retried.
var errRaced = errors.New("store: batch raced another writer")

// PersistOrders stores a batch of orders the Redis gate accepted, all or
// nothing, and idempotently: an order whose id is stored already is
// OutcomeAlreadyPresent, one whose voucher and user hold another order
// OutcomeConflict, and the rest are inserted with status created (keeping
// CreatedAt if set, else now), each taking a unit of its voucher's stock.
// When a voucher has too little stock nothing is stored and the error is a
// *StockShortError wrapping flashsale.ErrStockShort (retry in smaller
// batches), and when a voucher does not exist a *UnknownVoucherError
// wrapping flashsale.ErrUnknownVoucher; a batch that keeps racing another
// writer gets EBusy. How: DESIGN.md.
func (db *DB) PersistOrders(ctx context.Context, orders []flashsale.Order) (flashsale.PersistResult, error) {
	for i := range orders {
		if orders[i].ID <= 0 {
			return flashsale.PersistResult{}, flashsale.Errorf(flashsale.EInvalid, "order id must be positive, got %d", orders[i].ID)
		}
	}
	if len(orders) == 0 {
		return flashsale.PersistResult{}, nil
	}
	// Most batches hold only new orders: try them as such first, which
	// spares the lookup of stored orders (two index probes per order);
	// a batch that is not, or that lost a lock race, goes the long way.
	var res flashsale.PersistResult
	err := db.Tx(ctx, func(tx *Tx) error {
		var err error
		res, err = tx.persistNew(ctx, db.dialect, orders)
		return err
	})
	if err == nil || !errors.Is(err, errNotAllNew) && flashsale.ErrorCode(err) != flashsale.EBusy {
		return res, err
	}
	err = db.txRetrying(ctx, func(tx *Tx) error {
		var err error
		res, err = tx.persist(ctx, db.dialect, orders)
		return err
	})
	if err != nil {
		return flashsale.PersistResult{}, err
	}
	return res, nil
}

// txRetrying runs fn in a transaction, as Tx does, and runs it again in a
// new one when it raced another writer (errRaced) or lost a lock race
// (EBusy), up to persistAttempts times in all. A race lost every time is
// returned with code EBusy.
func (db *DB) txRetrying(ctx context.Context, fn func(tx *Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := db.Tx(ctx, fn)
		if err == nil {
			return nil
		}
		retry := errors.Is(err, errRaced) || flashsale.ErrorCode(err) == flashsale.EBusy
		if !retry || attempt == persistAttempts || ctx.Err() != nil {
			if errors.Is(err, errRaced) {
				err = fmt.Errorf("%w: %w", flashsale.Errorf(flashsale.EBusy, "orders are being stored by another writer, try again"), err)
			}
			return err
		}
	}
}

// errNotAllNew says a batch held an order stored already (or twice): it
// is rolled back and persisted again the long way, looking each order up.
var errNotAllNew = errors.New("store: the batch is not all new orders")

// persistNew runs PersistOrders inside tx for a batch of orders none of
// which is stored yet: it inserts them all and takes their stock, or
// returns errNotAllNew when some row was not inserted (the caller rolls
// tx back).
func (tx *Tx) persistNew(ctx context.Context, dialect string, orders []flashsale.Order) (flashsale.PersistResult, error) {
	sorted := slices.SortedFunc(slices.Values(orders), func(a, b flashsale.Order) int { return cmp.Compare(a.ID, b.ID) })
	err := tx.insertNewOrders(ctx, dialect, sorted)
	if errors.Is(err, errRaced) {
		return flashsale.PersistResult{}, fmt.Errorf("%w: %w", errNotAllNew, err)
	}
	if err != nil {
		return flashsale.PersistResult{}, err
	}
	perVoucher := map[int64]int{}
	for _, o := range orders {
		perVoucher[o.VoucherID]++
	}
	for _, v := range slices.Sorted(maps.Keys(perVoucher)) {
		if err := tx.takeStock(ctx, v, perVoucher[v]); err != nil {
			return flashsale.PersistResult{}, err
		}
	}
	res := flashsale.PersistResult{Outcomes: make([]flashsale.Outcome, len(orders)), Inserted: len(orders)}
	for i := range res.Outcomes {
		res.Outcomes[i] = flashsale.OutcomeInserted
	}
	return res, nil
}

// pair is an order's voucher and user.
type pair struct{ voucher, user int64 }

// persist runs one attempt of PersistOrders inside tx.
func (tx *Tx) persist(ctx context.Context, dialect string, orders []flashsale.Order) (flashsale.PersistResult, error) {
	ids, pairs, err := tx.storedOrders(ctx, orders)
	if err != nil {
		return flashsale.PersistResult{}, err
	}
	res := flashsale.PersistResult{Outcomes: make([]flashsale.Outcome, len(orders))}
	var fresh []flashsale.Order
	perVoucher := map[int64]int{}
	for i, o := range orders {
		p := pair{o.VoucherID, o.UserID}
		switch {
		case ids[o.ID]:
			res.Outcomes[i] = flashsale.OutcomeAlreadyPresent
			res.AlreadyPresent++
		case pairs[p]:
			res.Outcomes[i] = flashsale.OutcomeConflict
			res.Conflicts++
		default:
			res.Outcomes[i] = flashsale.OutcomeInserted
			res.Inserted++
			ids[o.ID], pairs[p] = true, true // later duplicates in the batch
			fresh = append(fresh, o)
			perVoucher[o.VoucherID]++
		}
	}
	// One lock order for every writer: rows by id, vouchers by id.
	slices.SortFunc(fresh, func(a, b flashsale.Order) int { return cmp.Compare(a.ID, b.ID) })
	if err := tx.insertNewOrders(ctx, dialect, fresh); err != nil {
		return flashsale.PersistResult{}, err
	}
	for _, v := range slices.Sorted(maps.Keys(perVoucher)) {
		if err := tx.takeStock(ctx, v, perVoucher[v]); err != nil {
			return flashsale.PersistResult{}, err
		}
	}
	return res, nil
}

// storedOrders returns which of the orders' ids, and which of their voucher
// and user pairs, are stored already.
func (tx *Tx) storedOrders(ctx context.Context, orders []flashsale.Order) (map[int64]bool, map[pair]bool, error) {
	ids, pairs := map[int64]bool{}, map[pair]bool{}
	for chunk := range slices.Chunk(orders, persistChunk) {
		query, args := storedOrdersQuery(chunk)
		rows, err := tx.r.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, nil, wrap("persist orders: look up", err)
		}
		for rows.Next() {
			var id int64
			var p pair
			if err := rows.Scan(&id, &p.voucher, &p.user); err != nil {
				rows.Close()
				return nil, nil, wrap("persist orders: look up", err)
			}
			ids[id], pairs[p] = true, true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, nil, wrap("persist orders: look up", err)
		}
	}
	return ids, pairs, nil
}

// storedOrdersQuery selects the stored orders that share an id, or a voucher
// and user, with one of the orders: two index lookups joined by UNION ALL,
// one round trip. The pairs are grouped by voucher so each group is one
// range of the (voucher_id, user_id) key.
func storedOrdersQuery(orders []flashsale.Order) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 3*len(orders))
	b.WriteString("SELECT id, voucher_id, user_id FROM orders WHERE id IN (")
	for i, o := range orders {
		b.WriteString(placeholder(i))
		args = append(args, o.ID)
	}
	b.WriteString(") UNION ALL SELECT id, voucher_id, user_id FROM orders WHERE ")
	users := map[int64][]any{}
	for _, o := range orders {
		users[o.VoucherID] = append(users[o.VoucherID], o.UserID)
	}
	for i, v := range slices.Sorted(maps.Keys(users)) {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(voucher_id = ? AND user_id IN (")
		args = append(args, v)
		for j, u := range users[v] {
			b.WriteString(placeholder(j))
			args = append(args, u)
		}
		b.WriteString("))")
	}
	return b.String(), args
}

// insertNewOrders inserts the orders with status created (and their
// CreatedAt and UpdatedAt where set, else now), skipping any whose id or
// voucher and user are taken. Every row must go in: a skipped one means
// another transaction stored it since storedOrders looked, and the batch's
// stock count would be wrong, so it returns errRaced.
func (tx *Tx) insertNewOrders(ctx context.Context, dialect string, orders []flashsale.Order) error {
	t := dbTime(now())
	for chunk := range slices.Chunk(orders, persistChunk) {
		var b strings.Builder
		args := make([]any, 0, 6*len(chunk))
		b.WriteString(insertIgnoreVerb(dialect) + " orders (id, voucher_id, user_id, status, created_at, updated_at) VALUES ")
		for i, o := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?)")
			created, updated := t, t
			if !o.CreatedAt.IsZero() {
				created = dbTime(o.CreatedAt)
			}
			if !o.UpdatedAt.IsZero() {
				updated = dbTime(o.UpdatedAt)
			}
			args = append(args, o.ID, o.VoucherID, o.UserID, string(flashsale.StatusCreated), created, updated)
		}
		res, err := tx.w.ExecContext(ctx, b.String(), args...)
		if err != nil {
			return wrap("persist orders: insert", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return wrap("persist orders: insert", err)
		}
		if n != int64(len(chunk)) {
			return fmt.Errorf("%w: %d of %d orders inserted", errRaced, n, len(chunk))
		}
	}
	return nil
}

// takeStock takes n from the voucher's remaining stock if that much is
// left, and returns a *StockShortError otherwise, or a
// *UnknownVoucherError when there is no such voucher.
func (tx *Tx) takeStock(ctx context.Context, voucherID int64, n int) error {
	ok, err := tx.DecrementRemaining(ctx, voucherID, n)
	if err != nil || ok {
		return err
	}
	// Remaining is read for the message only; on MySQL it comes from the
	// transaction's snapshot and may be a little stale.
	short := &StockShortError{VoucherID: voucherID, Needed: n}
	short.Remaining, err = tx.Remaining(ctx, voucherID)
	if flashsale.ErrorCode(err) == flashsale.ENotFound {
		return &UnknownVoucherError{VoucherID: voucherID, Needed: n}
	}
	if err != nil {
		return err
	}
	return short
}

// placeholder returns the i-th placeholder of a list: "?" or ", ?".
func placeholder(i int) string {
	if i == 0 {
		return "?"
	}
	return ", ?"
}
