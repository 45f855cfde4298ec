package consume

import (
	"context"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
)

// Internals the external tests (package consume_test) use.

var ParseOrder = parseOrder

// Handle has a worker of c persist entries of the voucher's keys vk as one
// delivered batch, as its read loop would.
func Handle(ctx context.Context, c *Consumer, voucherID int64, vk layout.VoucherKeys, entries []rueidis.XRangeEntry) error {
	w := &worker{c: c, voucher: voucherID, keys: vk, log: c.log}
	return w.handle(ctx, entries, nil)
}
