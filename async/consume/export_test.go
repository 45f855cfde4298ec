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

// Worker is a worker of a Consumer for one voucher's keys.
type Worker struct{ w *worker }

// NewWorker returns a worker of c for the voucher's keys vk.
func NewWorker(c *Consumer, voucherID int64, vk layout.VoucherKeys) *Worker {
	return &Worker{&worker{c: c, voucher: voucherID, keys: vk, log: c.log}}
}

// Handle has the worker persist entries as one delivered batch, as its
// read loop would.
func (w *Worker) Handle(ctx context.Context, entries []rueidis.XRangeEntry) error {
	return w.w.handle(ctx, entries, nil, false)
}
