package dashboard

import (
	"cmp"
	"time"

	"github.com/flashsale/flashsale/metrics"
)

// A voucher's status, as the page badges it.
const (
	upcoming = "upcoming" // its sale has not begun
	onSale   = "on_sale"  // in its sale window, with stock left
	soldOut  = "sold_out" // in its sale window, without stock
	ended    = "ended"    // its sale window is over
)

// status returns the voucher's status at now. The sale window is
// [BeginTime, EndTime), as flashsale.Voucher.CheckWindow has it; the stock
// left is Redis's when the voucher is loaded there (the async gate sells
// from it, ahead of MySQL), else MySQL's.
func status(v metrics.VoucherSample, now time.Time) string {
	left := v.RemainingMySQL
	if v.RemainingRedis != nil {
		left = *v.RemainingRedis
	}
	switch {
	case now.Before(v.BeginTime):
		return upcoming
	case !now.Before(v.EndTime):
		return ended
	case left <= 0:
		return soldOut
	}
	return onSale
}

// current returns the index in vs of the voucher the page opens on, the
// one selling now or most recently; -1 when vs is empty. Among the
// vouchers whose sale has begun, that is the one whose stock fell last,
// a sale's beginning counting as a fall (so a sale that has just begun
// wins over one that sold out minutes ago); ties go to a voucher on sale,
// then to the one that began last. When none has begun, it is the one
// that begins first.
func current(vs []metrics.VoucherSample, now time.Time) int {
	best := -1
	for i, v := range vs {
		if best < 0 || opensBefore(v, vs[best], now) {
			best = i
		}
	}
	return best
}

// opensBefore reports whether the page should rather open on a than on b.
func opensBefore(a, b metrics.VoucherSample, now time.Time) bool {
	aBegun, bBegun := !now.Before(a.BeginTime), !now.Before(b.BeginTime)
	if aBegun != bBegun {
		return aBegun
	}
	if !aBegun {
		return a.BeginTime.Before(b.BeginTime)
	}
	if c := lastActive(a).Compare(lastActive(b)); c != 0 {
		return c > 0
	}
	selling := func(v metrics.VoucherSample) bool { return status(v, now) == onSale }
	if selling(a) != selling(b) {
		return selling(a)
	}
	return cmp.Or(a.BeginTime.Compare(b.BeginTime), cmp.Compare(a.ID, b.ID)) > 0
}

// lastActive returns when the voucher's stock last fell, or when its sale
// began if that is later.
func lastActive(v metrics.VoucherSample) time.Time {
	if v.LastSold.After(v.BeginTime) {
		return v.LastSold
	}
	return v.BeginTime
}
