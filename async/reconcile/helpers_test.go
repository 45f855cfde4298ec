package reconcile_test

import (
	"strconv"

	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/store"
)

func init() { asynctest.UseStore(store.Open) }

// buyDeadLettered buys for user and dead-letters the order as a consumer
// would, with reason and kind; an empty kind writes the format of before
// dead letters had one.
func buyDeadLettered(e *asynctest.Env, voucherID, user int64, reason, kind string) {
	e.T.Helper()
	e.Buy(voucherID, user)
	e.DeadLetter(e.Keys.Voucher(voucherID), e.Deliver(voucherID, "c", 1)[0], reason, kind)
}

// itoa formats an id.
func itoa(n int64) string { return strconv.FormatInt(n, 10) }
