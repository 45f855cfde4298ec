package dashboard

import (
	"testing"
	"time"

	"github.com/flashsale/flashsale/metrics"
)

var now = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// sample is a voucher of stock 10 whose sale runs from begin to end after
// now, with left units left in MySQL and, unless redis is -1, in Redis.
func sample(id int64, begin, end time.Duration, left, redis int) metrics.VoucherSample {
	v := metrics.VoucherSample{ID: id, Stock: 10, BeginTime: now.Add(begin), EndTime: now.Add(end), RemainingMySQL: left}
	if redis >= 0 {
		v.RemainingRedis = &redis
	}
	return v
}

func TestStatus(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    metrics.VoucherSample
		want string
	}{
		{"before the begin", sample(1, time.Second, time.Hour, 10, 10), upcoming},
		{"at the begin", sample(1, 0, time.Hour, 10, 10), onSale},
		{"Redis sold out, MySQL not yet", sample(1, -time.Minute, time.Hour, 3, 0), soldOut},
		{"Redis has stock, MySQL lags", sample(1, -time.Minute, time.Hour, 0, 2), onSale},
		{"sold out in MySQL, not in Redis", sample(1, -time.Minute, time.Hour, 0, -1), soldOut},
		{"at the end", sample(1, -time.Minute, 0, 4, 4), ended},
		{"sold out and ended", sample(1, -time.Minute, -time.Second, 0, 0), ended},
	} {
		if got := status(tt.v, now); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestCurrent checks which voucher the page opens on.
func TestCurrent(t *testing.T) {
	sold := func(v metrics.VoucherSample, ago time.Duration) metrics.VoucherSample {
		v.LastSold = now.Add(-ago)
		return v
	}
	var (
		soon      = sample(1, time.Hour, 2*time.Hour, 10, 10)
		later     = sample(2, 3*time.Hour, 4*time.Hour, 10, 10)
		selling   = sold(sample(3, -time.Minute, time.Hour, 5, 5), 2*time.Second)
		idle      = sample(4, -30*time.Second, time.Hour, 10, 10) // began after selling, never sold
		soldOut   = sold(sample(5, -2*time.Minute, time.Hour, 0, 0), 2*time.Second)
		justEnded = sold(sample(6, -time.Minute, -time.Second, 0, 0), 10*time.Second)
		ended     = sample(7, -5*time.Minute, -4*time.Minute, 10, 10)
		justBegun = sample(8, -time.Second, time.Hour, 10, 10)
	)
	for _, tt := range []struct {
		name string
		vs   []metrics.VoucherSample
		want int64 // 0: none
	}{
		{"none", nil, 0},
		{"all upcoming: the first to begin", []metrics.VoucherSample{later, soon}, 1},
		{"the selling one, not the upcoming one listed first", []metrics.VoucherSample{soon, ended, selling}, 3},
		{"the one that sold last, not one that began later", []metrics.VoucherSample{idle, selling}, 3},
		{"on sale wins a tie with sold out", []metrics.VoucherSample{soldOut, selling}, 3},
		{"a sale that ended just now over an idle one", []metrics.VoucherSample{ended, justEnded, soon}, 6},
		{"a sale that has just begun", []metrics.VoucherSample{justEnded, selling, justBegun}, 8},
		{"ended only", []metrics.VoucherSample{soon, ended}, 7},
	} {
		got := int64(0)
		if i := current(tt.vs, now); i >= 0 {
			got = tt.vs[i].ID
		}
		if got != tt.want {
			t.Errorf("%s: voucher %d, want %d", tt.name, got, tt.want)
		}
	}
}
