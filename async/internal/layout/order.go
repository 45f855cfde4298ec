package layout

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
)

// ErrMalformed is wrapped when a stream entry cannot be read as an order.
var ErrMalformed = errors.New("async: malformed stream entry")

// parseOrder reads the fields of an orders stream entry as an order of
// the voucher, accepted when Redis stamped the entry: its quantity, its
// pay_by and idempotency key if it has them. Its status is left empty.
func parseOrder(voucherID int64, entry string, fields map[string]string) (flashsale.Order, error) {
	o := flashsale.Order{VoucherID: voucherID, Quantity: 1, CreatedAt: EntryTime(entry), IdempotencyKey: fields[FieldKey]}
	var err error
	if o.ID, err = positive(fields, FieldOrder); err != nil {
		return flashsale.Order{}, fmt.Errorf("%w: entry %s: %w", ErrMalformed, entry, err)
	}
	if o.UserID, err = positive(fields, FieldUser); err != nil {
		return flashsale.Order{}, fmt.Errorf("%w: entry %s: %w", ErrMalformed, entry, err)
	}
	if _, ok := fields[FieldQuantity]; ok {
		q, err := positive(fields, FieldQuantity)
		if err != nil || q > flashsale.MaxLimitPerBuyer {
			return flashsale.Order{}, fmt.Errorf("%w: entry %s: quantity %q", ErrMalformed, entry, fields[FieldQuantity])
		}
		o.Quantity = int(q)
	}
	if _, ok := fields[FieldPayBy]; ok {
		us, err := positive(fields, FieldPayBy)
		if err != nil {
			return flashsale.Order{}, fmt.Errorf("%w: entry %s: %w", ErrMalformed, entry, err)
		}
		o.PayBy = time.UnixMicro(us).UTC()
	}
	return o, nil
}

// positive reads the field as a positive integer.
func positive(fields map[string]string, name string) (int64, error) {
	n, err := strconv.ParseInt(fields[name], 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("field %s is %q, not a positive integer", name, fields[name])
	}
	return n, nil
}

// An orders stream entry holds one order or one gate batch's orders.
//
//   - One order: FieldOrder and FieldUser, with FieldQuantity, FieldPayBy
//     and FieldKey when it has them. requeue.lua writes this form, as
//     gates before issue 34's batch entries did.
//   - A gate batch: one field per order, named by the order id, whose
//     value is the buyer ("<user>"), or "<user> <quantity> <pay_by µs>
//     <key>" for an order with more than one unit, a payment window or an
//     idempotency key (BatchValue). One XADD per gate call, not per order,
//     and the consumer reads and acknowledges one entry per batch (issue
//     34: 2.7 µs of Redis per order for the entry, 3 for its read and ack).
//
// Everything downstream of the gate reads an entry through ParseEntry or
// EntryOrderIDs, and acknowledges, claims and counts deliveries per entry.

// isBatchEntry reports whether an entry's fields are a gate batch's.
func isBatchEntry(fields map[string]string) bool {
	_, single := fields[FieldOrder]
	return !single && len(fields) > 0
}

// BadOrder is an order of an entry that could not be read: its order and
// user ids as written (either may be empty) and why.
type BadOrder struct {
	Order, User string
	Err         error
}

// ParseEntry reads an orders stream entry's orders, accepted when Redis
// stamped the entry, with their statuses left empty; bad lists those that
// cannot be read (an entry of one order that cannot is one bad order). The
// orders of a batch come in ascending id.
func ParseEntry(voucherID int64, entry string, fields map[string]string) (orders []flashsale.Order, bad []BadOrder) {
	if !isBatchEntry(fields) {
		o, err := parseOrder(voucherID, entry, fields)
		if err != nil {
			return nil, []BadOrder{{Order: fields[FieldOrder], User: fields[FieldUser], Err: err}}
		}
		return []flashsale.Order{o}, nil
	}
	orders = make([]flashsale.Order, 0, len(fields))
	for id, v := range fields {
		o, err := parseBatchOrder(voucherID, entry, id, v)
		if err != nil {
			user, _, _ := strings.Cut(v, " ")
			bad = append(bad, BadOrder{Order: id, User: user, Err: fmt.Errorf("%w: entry %s: %w", ErrMalformed, entry, err)})
			continue
		}
		orders = append(orders, o)
	}
	slices.SortFunc(orders, func(a, b flashsale.Order) int { return cmp.Compare(a.ID, b.ID) })
	return orders, bad
}

// parseBatchOrder reads one order of a batch entry: its id and its value.
func parseBatchOrder(voucherID int64, entry, id, v string) (flashsale.Order, error) {
	o := flashsale.Order{VoucherID: voucherID, Quantity: 1, CreatedAt: EntryTime(entry)}
	parts := strings.SplitN(v, " ", 4)
	fields := map[string]string{FieldOrder: id, FieldUser: parts[0]}
	if len(parts) == 4 {
		fields[FieldQuantity], fields[FieldKey] = parts[1], parts[3]
		if parts[2] != "0" {
			fields[FieldPayBy] = parts[2]
		}
	} else if len(parts) != 1 {
		return o, fmt.Errorf("order %s: value %q is neither a buyer nor four parts", id, v)
	}
	return parseOrder(voucherID, entry, fields)
}

// EntryOrderIDs returns the ids of an orders stream entry's orders, as
// written, without checking them.
func EntryOrderIDs(fields map[string]string) []string {
	if !isBatchEntry(fields) {
		if id, ok := fields[FieldOrder]; ok {
			return []string{id}
		}
		return nil
	}
	ids := make([]string, 0, len(fields))
	for id := range fields {
		ids = append(ids, id)
	}
	return ids
}
