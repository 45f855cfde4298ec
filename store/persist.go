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
// nothing, idempotently: OutcomeAlreadyPresent for an id stored already,
// OutcomeConflict for an order past its buyer's limit,
// OutcomeKeyConflict for one whose idempotency key (for its voucher and
// user) another order id holds, and the rest
// inserted (awaiting payment with a PayBy, else created) taking their
// units. Errors: a *StockShortError (retry in smaller batches), an
// *UnknownVoucherError, or EBusy for a batch that keeps racing another
// writer; then nothing is stored. How: DESIGN.md.
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
	// An order that another order's unique key (its idempotency key)
	// keeps out is found by the attempt that skips it, and the next one
	// answers it OutcomeKeyConflict: each round finds at least one.
	keyTaken := map[int64]bool{}
	for {
		err = db.txRetrying(ctx, func(tx *Tx) error {
			var err error
			res, err = tx.persist(ctx, db.dialect, orders, keyTaken)
			return err
		})
		var kc *keyConflictError
		if !errors.As(err, &kc) {
			break
		}
		for _, id := range kc.ids {
			keyTaken[id] = true
		}
	}
	if err != nil {
		return flashsale.PersistResult{}, err
	}
	return res, nil
}

// keyConflictError says which orders of an attempt INSERT IGNORE skipped
// although no order holds their id: another unique key of the orders
// (the voucher, user and idempotency key) kept them out. The batch is
// persisted again without them.
type keyConflictError struct{ ids []int64 }

func (e *keyConflictError) Error() string {
	return fmt.Sprintf("store: %d orders kept out by another order's idempotency key", len(e.ids))
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
// which is stored yet and none of which passes its buyer's limit: it
// inserts them all, takes their stock and adds their buyers' units, or
// returns errNotAllNew when some row was not inserted or some buyer would
// pass the limit (the caller rolls tx back).
func (tx *Tx) persistNew(ctx context.Context, dialect string, orders []flashsale.Order) (flashsale.PersistResult, error) {
	sorted := slices.SortedFunc(slices.Values(orders), func(a, b flashsale.Order) int { return cmp.Compare(a.ID, b.ID) })
	err := tx.insertNewOrders(ctx, dialect, sorted)
	if errors.Is(err, errRaced) {
		return flashsale.PersistResult{}, fmt.Errorf("%w: %w", errNotAllNew, err)
	}
	if err != nil {
		return flashsale.PersistResult{}, err
	}
	if err := tx.takeStockAndUnits(ctx, orders); err != nil {
		if errors.Is(err, errOverLimit) {
			return flashsale.PersistResult{}, fmt.Errorf("%w: %w", errNotAllNew, err)
		}
		return flashsale.PersistResult{}, err
	}
	res := flashsale.PersistResult{Outcomes: make([]flashsale.Outcome, len(orders)), Inserted: len(orders)}
	for i := range res.Outcomes {
		res.Outcomes[i] = flashsale.OutcomeInserted
	}
	return res, nil
}

// takeStockAndUnits takes the orders' units from their vouchers' stock,
// counts them live and writes their order.placed, one statement per
// voucher, and adds them to their buyers', in that order (vouchers by id,
// then buyers).
func (tx *Tx) takeStockAndUnits(ctx context.Context, orders []flashsale.Order) error {
	perVoucher, placed := map[int64]int{}, map[int64][]int64{}
	changes := make([]unitChange, len(orders))
	for i, o := range orders {
		perVoucher[o.VoucherID] += o.Units()
		placed[o.VoucherID] = append(placed[o.VoucherID], o.ID)
		changes[i] = unitChange{o.VoucherID, o.UserID, o.Units()}
	}
	vouchers := slices.Sorted(maps.Keys(perVoucher))
	for _, v := range vouchers {
		slices.Sort(placed[v])
		if err := tx.takeStock(ctx, v, perVoucher[v], placed[v]); err != nil {
			return err
		}
	}
	limits, err := tx.buyerLimits(ctx, vouchers)
	if err != nil {
		return err
	}
	return tx.addUnits(ctx, changes, limits)
}

// pair is an order's voucher and user.
type pair struct{ voucher, user int64 }

// persist runs one attempt of PersistOrders inside tx; the orders in
// keyTaken whose ids are not stored are answered OutcomeKeyConflict.
func (tx *Tx) persist(ctx context.Context, dialect string, orders []flashsale.Order, keyTaken map[int64]bool) (flashsale.PersistResult, error) {
	ids, err := tx.storedIDs(ctx, orders)
	if err != nil {
		return flashsale.PersistResult{}, err
	}
	room, err := tx.buyerRoom(ctx, orders)
	if err != nil {
		return flashsale.PersistResult{}, err
	}
	res := flashsale.PersistResult{Outcomes: make([]flashsale.Outcome, len(orders))}
	var fresh []flashsale.Order
	for i, o := range orders {
		switch {
		case ids[o.ID]:
			res.Outcomes[i] = flashsale.OutcomeAlreadyPresent
			res.AlreadyPresent++
		case keyTaken[o.ID]:
			res.Outcomes[i] = flashsale.OutcomeKeyConflict
			res.Conflicts++
		case !room.fits(o):
			res.Outcomes[i] = flashsale.OutcomeConflict
			res.Conflicts++
		default:
			res.Outcomes[i] = flashsale.OutcomeInserted
			res.Inserted++
			ids[o.ID] = true // later duplicates in the batch
			room.take(o)
			fresh = append(fresh, o)
		}
	}
	// One lock order for every writer: rows by id, vouchers by id, buyers.
	slices.SortFunc(fresh, func(a, b flashsale.Order) int { return cmp.Compare(a.ID, b.ID) })
	if err := tx.insertNewOrders(ctx, dialect, fresh); err != nil {
		if errors.Is(err, errRaced) {
			err = tx.keptOut(ctx, dialect, fresh, err)
		}
		return flashsale.PersistResult{}, err
	}
	if len(fresh) == 0 {
		return res, nil
	}
	err = tx.takeStockAndUnits(ctx, fresh)
	if errors.Is(err, errOverLimit) {
		// A buyer's units grew since buyerRoom read them: look again.
		return flashsale.PersistResult{}, fmt.Errorf("%w: %w", errRaced, err)
	}
	return res, err
}

// keptOut tells why INSERT IGNORE skipped some of orders (raced): it
// reads their ids again, as they are now (a locking read on MySQL, past
// the transaction's snapshot), and returns a *keyConflictError naming
// those no row holds, kept out by another unique key; or raced when every
// one is stored (another writer stored them since storedIDs looked).
func (tx *Tx) keptOut(ctx context.Context, dialect string, orders []flashsale.Order, raced error) error {
	stored := map[int64]bool{}
	for chunk := range slices.Chunk(orders, persistChunk) {
		args := make([]any, len(chunk))
		for i, o := range chunk {
			args[i] = o.ID
		}
		ids, err := int64s(ctx, tx.w, "persist orders: look up skipped", "SELECT id FROM orders WHERE id IN "+placeholders(len(chunk))+forUpdate(dialect), args...)
		if err != nil {
			return err
		}
		for _, id := range ids {
			stored[id] = true
		}
	}
	kc := &keyConflictError{}
	for _, o := range orders {
		if !stored[o.ID] {
			kc.ids = append(kc.ids, o.ID)
		}
	}
	if len(kc.ids) == 0 {
		return raced
	}
	return kc
}

// storedIDs returns which of the orders' ids are stored already.
func (tx *Tx) storedIDs(ctx context.Context, orders []flashsale.Order) (map[int64]bool, error) {
	ids := map[int64]bool{}
	for chunk := range slices.Chunk(orders, persistChunk) {
		args := make([]any, len(chunk))
		for i, o := range chunk {
			args[i] = o.ID
		}
		stored, err := int64s(ctx, tx.r, "persist orders: look up", "SELECT id FROM orders WHERE id IN "+placeholders(len(chunk)), args...)
		if err != nil {
			return nil, err
		}
		for _, id := range stored {
			ids[id] = true
		}
	}
	return ids, nil
}

// insertNewOrders inserts the orders as new live orders — awaiting payment
// when they have a PayBy, created otherwise — with their quantity, pay_by
// and idempotency key (and their CreatedAt and
// UpdatedAt where set, else now), skipping any whose id is taken. Every
// row must go in: a skipped one means another transaction stored it since
// storedIDs looked, and the batch's stock count would be wrong, so it
// returns errRaced.
func (tx *Tx) insertNewOrders(ctx context.Context, dialect string, orders []flashsale.Order) error {
	tnow := now()
	t := dbTime(tnow)
	inserted := 0
	for chunk := range slices.Chunk(orders, persistChunk) {
		var b strings.Builder
		args := make([]any, 0, 9*len(chunk))
		b.WriteString(insertIgnoreVerb(dialect) + " orders (id, voucher_id, user_id, quantity, status, pay_by, idempotency_key, created_at, updated_at) VALUES ")
		b.WriteString(valueRows(len(chunk), 9))
		for _, o := range chunk {
			status := flashsale.StatusCreated
			if !o.PayBy.IsZero() {
				status = flashsale.StatusAwaitingPayment
			}
			created, updated := t, t
			if !o.CreatedAt.IsZero() {
				created = dbTime(o.CreatedAt)
			}
			if !o.UpdatedAt.IsZero() {
				updated = dbTime(o.UpdatedAt)
			}
			args = append(args, o.ID, o.VoucherID, o.UserID, o.Units(), string(status), nullTime(o.PayBy), nullString(o.IdempotencyKey), created, updated)
		}
		res, err := tx.w.ExecContext(ctx, b.String(), args...)
		if err != nil {
			return wrap("persist orders: insert", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return wrap("persist orders: insert", err)
		}
		inserted += int(n)
	}
	if inserted != len(orders) { // every chunk was tried: keptOut looks at all
		return fmt.Errorf("%w: %d of %d orders inserted", errRaced, inserted, len(orders))
	}
	return nil
}

// takeStock takes n from the voucher's remaining stock if that much is
// left for the orders placed (their ids, sorted), counting them live and
// writing their order.placed in the same statement (decrement), and
// returns a *StockShortError otherwise, or a *UnknownVoucherError when
// there is no such voucher.
func (tx *Tx) takeStock(ctx context.Context, voucherID int64, n int, placed []int64) error {
	ok, err := tx.decrement(ctx, voucherID, n, len(placed), tx.placedData(placed))
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
