package consume

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// Internals the external tests (package consume_test) use.

// ParseOrders reads a stream entry's orders as the worker does.
func ParseOrders(voucherID int64, e rueidis.XRangeEntry) ([]flashsale.Order, error) {
	orders, bad := layout.ParseEntry(voucherID, e.ID, e.FieldValues)
	if len(bad) > 0 {
		return nil, bad[0].Err
	}
	for i := range orders {
		orders[i].Status = flashsale.StatusPending
	}
	return orders, nil
}

// Handle has a worker of c persist entries of the voucher's keys vk as one
// delivered batch, as its read loop would.
func Handle(ctx context.Context, c *Consumer, voucherID int64, vk layout.VoucherKeys, entries []rueidis.XRangeEntry) error {
	w := &worker{c: c, voucher: voucherID, keys: vk, log: c.log}
	return w.handle(ctx, entries, nil, false)
}
