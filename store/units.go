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

// A buyer's live units of a voucher are kept in buyer_units, whose CHECK
// (units between 0 and max_units, the voucher's limit) refuses a buyer
// more than the limit whatever the code in front of it decided: the last
// line of defence for the per-buyer limit.

// unitChange is a change of a buyer's live units of a voucher.
type unitChange struct {
	voucher, user int64
	units         int
}

// sumUnits adds up the changes per buyer, in (voucher, user) order: the
// one order in which every transaction locks buyer rows.
func sumUnits(changes []unitChange) []unitChange {
	sums := map[pair]int{}
	for _, c := range changes {
		sums[pair{c.voucher, c.user}] += c.units
	}
	out := make([]unitChange, 0, len(sums))
	for p, n := range sums {
		out = append(out, unitChange{p.voucher, p.user, n})
	}
	slices.SortFunc(out, func(a, b unitChange) int {
		return cmp.Or(cmp.Compare(a.voucher, b.voucher), cmp.Compare(a.user, b.user))
	})
	return out
}

// addUnits adds each change's units to its buyer's, creating the rows it
// needs with max_units from limits (voucher id → limit per buyer). When a
// buyer would pass the limit it returns ELimitReached, or EDuplicateOrder
// when every voucher of the chunk has a limit of 1; then the statement
// changed nothing, and the caller rolls back.
func (tx *Tx) addUnits(ctx context.Context, changes []unitChange, limits map[int64]int) error {
	for chunk := range slices.Chunk(sumUnits(changes), persistChunk) {
		var b strings.Builder
		args := make([]any, 0, 4*len(chunk))
		b.WriteString("INSERT INTO buyer_units (voucher_id, user_id, units, max_units) VALUES ")
		b.WriteString(valueRows(len(chunk), 4))
		for _, c := range chunk {
			// A first order above the limit fails the CHECK as an insert.
			args = append(args, c.voucher, c.user, c.units, max(limits[c.voucher], 1))
		}
		b.WriteString(upsertAdding(tx.dialect))
		if _, err := tx.w.ExecContext(ctx, b.String(), args...); err != nil {
			if isCheckViolation(err) {
				return fmt.Errorf("%w: %w: %w", limitReached(chunk, limits), errOverLimit, err)
			}
			return wrap("add buyer units", err)
		}
	}
	return nil
}

// takeUnits takes each change's units from its buyer's: the units of
// orders that closed. A buyer without that many is a broken invariant, and
// an error.
func (tx *Tx) takeUnits(ctx context.Context, changes []unitChange) error {
	// One statement per voucher and amount: nearly every order is of one
	// unit, so a batch of expiries is a statement or two.
	groups := map[unitChange][]any{} // voucher and units → users
	for _, c := range sumUnits(changes) {
		k := unitChange{voucher: c.voucher, units: c.units}
		groups[k] = append(groups[k], c.user)
	}
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b unitChange) int {
		return cmp.Or(cmp.Compare(a.voucher, b.voucher), cmp.Compare(a.units, b.units))
	})
	for _, k := range keys {
		for users := range slices.Chunk(groups[k], persistChunk) {
			query := "UPDATE buyer_units SET units = units - ? WHERE voucher_id = ? AND user_id IN " + placeholders(len(users))
			res, err := tx.w.ExecContext(ctx, query, append([]any{k.units, k.voucher}, users...)...)
			if err != nil {
				return wrap(fmt.Sprintf("take buyer units of voucher %d", k.voucher), err)
			}
			if n, err := res.RowsAffected(); err != nil || n != int64(len(users)) {
				return fmt.Errorf("store: take buyer units of voucher %d: %d of %d buyers found (%v)", k.voucher, n, len(users), err)
			}
		}
	}
	return nil
}

// errOverLimit is wrapped by addUnits when a buyer would pass the limit.
var errOverLimit = errors.New("store: a buyer's units would pass the limit")

// limitReached is the error of an order among changes that would take its
// buyer past the voucher's limit: EDuplicateOrder when every voucher has a
// limit of 1, ELimitReached otherwise.
func limitReached(changes []unitChange, limits map[int64]int) error {
	for _, c := range changes {
		if limits[c.voucher] > 1 {
			return flashsale.Errorf(flashsale.ELimitReached, "this order would pass the voucher's limit per buyer")
		}
	}
	return flashsale.Errorf(flashsale.EDuplicateOrder, "you already have an order for this voucher")
}

// buyerLimits returns the vouchers' limits per buyer; a voucher that does
// not exist is left out.
func (tx *Tx) buyerLimits(ctx context.Context, vouchers []int64) (map[int64]int, error) {
	limits := map[int64]int{}
	if len(vouchers) == 0 {
		return limits, nil
	}
	rows, err := tx.r.QueryContext(ctx, "SELECT id, limit_per_buyer FROM vouchers WHERE id IN "+placeholders(len(vouchers)), anys(vouchers)...)
	if err != nil {
		return nil, wrap("limits per buyer", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var limit int
		if err := rows.Scan(&id, &limit); err != nil {
			return nil, wrap("limits per buyer", err)
		}
		limits[id] = limit
	}
	return limits, wrap("limits per buyer", rows.Err())
}

// room is what the buyers of a batch may still buy: the units their live
// orders hold and their vouchers' limits.
type room struct {
	units  map[pair]int
	limits map[int64]int
}

// fits reports whether o stays within its buyer's limit.
func (r room) fits(o flashsale.Order) bool {
	limit, ok := r.limits[o.VoucherID]
	return !ok || r.units[pair{o.VoucherID, o.UserID}]+o.Units() <= limit
}

// take counts o's units as its buyer's.
func (r room) take(o flashsale.Order) { r.units[pair{o.VoucherID, o.UserID}] += o.Units() }

// buyerRoom reads the room of the orders' buyers. A voucher that does not
// exist has no limit here: takeStock refuses its orders.
func (tx *Tx) buyerRoom(ctx context.Context, orders []flashsale.Order) (room, error) {
	users := map[int64][]any{}
	for _, o := range orders {
		users[o.VoucherID] = append(users[o.VoucherID], o.UserID)
	}
	vouchers := slices.Sorted(maps.Keys(users))
	r := room{units: map[pair]int{}}
	var err error
	if r.limits, err = tx.buyerLimits(ctx, vouchers); err != nil {
		return room{}, err
	}
	for _, v := range vouchers {
		for chunk := range slices.Chunk(users[v], persistChunk) {
			if err := tx.readUnits(ctx, v, chunk, r.units); err != nil {
				return room{}, err
			}
		}
	}
	return r, nil
}

// readUnits adds to units the live units of the voucher's given users.
func (tx *Tx) readUnits(ctx context.Context, voucherID int64, users []any, units map[pair]int) error {
	rows, err := tx.r.QueryContext(ctx, "SELECT user_id, units FROM buyer_units WHERE voucher_id = ? AND user_id IN "+placeholders(len(users)),
		append([]any{voucherID}, users...)...)
	if err != nil {
		return wrap("buyer units", err)
	}
	defer rows.Close()
	for rows.Next() {
		var user int64
		var n int
		if err := rows.Scan(&user, &n); err != nil {
			return wrap("buyer units", err)
		}
		units[pair{voucherID, user}] = n
	}
	return wrap("buyer units", rows.Err())
}
