package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// BenchmarkWindowSale measures the async sale shape of BenchmarkHotVoucher
// (stock 1,000, every buyer clicking five times) on a voucher without a
// payment window, with a window of ten minutes (nothing expires during
// the run: what a window itself costs the hot path, the expirer polling
// beside it) and with a window of one second that nobody pays (every unit
// expires, goes back into the gate's stock and is sold again, over and
// over: the returns run beside the hot path, and far more attempts are
// accepted orders than in a sale that sells out once). Compare the
// ratios (attempts/s over /healthz/s, measured in the same run).
func BenchmarkWindowSale(b *testing.B) {
	for _, window := range []int{0, 600, 1} {
		b.Run(fmt.Sprintf("async/window=%ds", window), func(b *testing.B) {
			api := newTestAPI(b, apiOptions{strategy: "async"})
			benchOrdersOn(b, api, api.createWindowVoucher(1000, window), max(b.N/5, 1))
		})
	}
}

// createWindowVoucher creates a voucher on sale for an hour with the stock
// and payment window (seconds).
func (api *testAPI) createWindowVoucher(stock, window int) string {
	api.t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	body := fmt.Sprintf(`{"title":"window sale","stock":%d,"pay_value":100,"payment_window_seconds":%d,"begin_time":%q,"end_time":%q}`,
		stock, window, time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	res := api.do("POST", "/api/vouchers", adminToken, body, &out)
	if res.StatusCode != http.StatusCreated || out.ID == "" {
		api.t.Fatalf("create voucher: status %d, id %q", res.StatusCode, out.ID)
	}
	return out.ID
}
