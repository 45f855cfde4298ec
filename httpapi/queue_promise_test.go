package httpapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// TestWaitingTicketPromisesOnlyTheUnits: with stock 3 and 3 passes out,
// a waiting ticket reads 0 units ahead and no ETA, the reason being the
// passes out (only one expiring unused can move it), and the room's
// stats say the same; in a room with units still to be admitted, the
// tickets within them get an ETA.
func TestWaitingTicketPromisesOnlyTheUnits(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createQueueVoucher(3, 100)
	for u := int64(1); u <= 3; u++ {
		api.waitState(vid, u, api.join(vid, u).Ticket, "admitted")
	}
	api.join(vid, 4)
	tk := api.join(vid, 5).Ticket
	var got map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		if res := api.do("GET", "/api/vouchers/"+vid+"/queue/"+tk, api.userToken(5), "", &got); res.StatusCode != http.StatusOK {
			t.Fatalf("poll: %d", res.StatusCode)
		}
		if got["units_ahead"] != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	eta, hasETA := got["eta_seconds"]
	if got["state"] != "waiting" || got["position"] != float64(2) || got["units_ahead"] != float64(0) || !hasETA || eta != nil || got["eta_reason"] != "passes_out" {
		t.Errorf("with 3 passes out for 3 units, a waiting ticket reads %v; want position 2, units_ahead 0, eta_seconds null, eta_reason passes_out", got)
	}
	st, err := api.queue.Stats(context.Background(), mustID(t, vid))
	if err != nil {
		t.Fatal(err)
	}
	if st.Unused != 3 || st.UnitsAhead != 0 || st.ETASeconds != nil || st.ETAReason != "passes_out" {
		t.Errorf("the room's stats: %+v; want 3 unused passes, 0 units ahead, no ETA for the reason passes_out", st)
	}

	room := api.createQueueVoucher(50, 1)
	first := api.join(room, 1)
	api.waitState(room, 1, first.Ticket, "admitted")
	var next map[string]any
	api.do("GET", "/api/vouchers/"+room+"/queue/"+api.join(room, 2).Ticket, api.userToken(2), "", &next)
	if next["state"] == "waiting" && (next["units_ahead"] != float64(49) || next["eta_seconds"] == nil || next["eta_reason"] != nil) {
		t.Errorf("in a room with 49 units still to be admitted, a waiting ticket reads %v; want units_ahead 49 and an ETA", next)
	}
}
