package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

// The waiting room on the embedded Redis serve uses without --redis
// (miniredis): its scripts (TIME, ZPOPMIN, UNLINK, EVALSHA_RO, unpack)
// run there, from joining to buying with the pass to sold_out.
func TestQueueOnMiniredis(t *testing.T) {
	for _, s := range []string{"conditional", "async"} {
		t.Run(s, func(t *testing.T) {
			mr := miniredis.RunT(t)
			rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, ForceSingleClient: true, DisableCache: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(rc.Close)
			api := newTestAPI(t, apiOptions{strategy: s, redis: rc})
			vid := api.createQueueVoucher(1, 100)
			first, second := api.join(vid, 1), api.join(vid, 2)
			if again := api.join(vid, 1); again.Ticket != first.Ticket {
				t.Fatalf("joining again: %+v, want %+v", again, first)
			}
			pass := api.waitState(vid, 1, first.Ticket, "admitted").Pass
			if res, body := api.orderWithPass(vid, 1, pass); res.StatusCode != http.StatusOK {
				t.Fatalf("order with the pass: %d %s", res.StatusCode, body.Error.Code)
			}
			res, body := api.orderWithPass(vid, 1, pass)
			wantError(t, res, body, http.StatusForbidden, "pass_invalid")
			api.waitState(vid, 2, second.Ticket, "sold_out")
		})
	}
}
