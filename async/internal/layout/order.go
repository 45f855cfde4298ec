package layout

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/flashsale/flashsale"
)

// ErrMalformed is wrapped when a stream entry cannot be read as an order.
var ErrMalformed = errors.New("async: malformed stream entry")

// ParseOrder reads the fields of an orders stream entry as an order of
// the voucher, accepted when Redis stamped the entry: its quantity, its
// pay_by and idempotency key if it has them. Its status is left empty.
func ParseOrder(voucherID int64, entry string, fields map[string]string) (flashsale.Order, error) {
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
