package httpapi_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
)

type eventPage struct {
	Events []flashsale.Event `json:"events"`
	Next   string            `json:"next"`
}

// TestPullEvents: GET /api/events pages through the outbox oldest first
// with a stable cursor; bad input is a 400 in the error shape.
func TestPullEvents(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createVoucher(3)
	for u := range 3 {
		if res := api.do("POST", "/api/vouchers/"+vid+"/orders", api.userToken(int64(100+u)), "", nil); res.StatusCode != 200 && res.StatusCode != 201 {
			t.Fatalf("order: %d", res.StatusCode)
		}
	}
	if _, err := api.db.SequenceEvents(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	var first, second, again eventPage
	if res := api.do("GET", "/api/events?limit=2", adminToken, "", &first); res.StatusCode != 200 || len(first.Events) != 2 {
		t.Fatalf("first page: %d, %+v", res.StatusCode, first)
	}
	if res := api.do("GET", "/api/events?limit=10&after="+url.QueryEscape(first.Next), adminToken, "", &second); res.StatusCode != 200 || len(second.Events) != 2 {
		t.Fatalf("second page: %d, %+v", res.StatusCode, second)
	}
	if second.Events[0].Type != flashsale.EventOrderPlaced || second.Events[1].Type != flashsale.EventVoucherSoldOut || second.Events[0].Sequence <= first.Events[1].Sequence {
		t.Errorf("second page = %+v", second.Events)
	}
	// The cursor is stable: the same page again, then an empty one.
	api.do("GET", "/api/events?limit=10&after="+url.QueryEscape(first.Next), adminToken, "", &again)
	if len(again.Events) != 2 || again.Events[0].ID != second.Events[0].ID {
		t.Errorf("same cursor again = %+v", again.Events)
	}
	var last eventPage
	api.do("GET", "/api/events?after="+url.QueryEscape(second.Next), adminToken, "", &last)
	if len(last.Events) != 0 || last.Next != second.Next {
		t.Errorf("after the last: %+v", last)
	}
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=abc", "after=-1"} {
		var eb struct {
			Error struct{ Code string } `json:"error"`
		}
		if res := api.do("GET", "/api/events?"+q, adminToken, "", &eb); res.StatusCode != 400 || eb.Error.Code != flashsale.EInvalid {
			t.Errorf("%s: %d %+v, want 400 invalid", q, res.StatusCode, eb)
		}
	}
	if res := api.do("GET", "/api/events", api.userToken(100), "", nil); res.StatusCode != 403 {
		t.Errorf("a user's pull: %d, want 403", res.StatusCode)
	}
}

// TestWebhookRegistry: create (the secret shown once), list, delete; bad
// input is a 400 and registers nothing.
func TestWebhookRegistry(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	for _, body := range []string{`{"url": "ftp://x/y"}`, `{"url": "not a url"}`, `{"url": "http://127.0.0.1:9/h", "events": ["order.shipped"]}`, `{}`, `{"url": 3}`} {
		if res := api.do("POST", "/api/webhooks", adminToken, body, nil); res.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", body, res.StatusCode)
		}
	}
	var list struct {
		Webhooks []flashsale.Webhook `json:"webhooks"`
	}
	if api.do("GET", "/api/webhooks", adminToken, "", &list); len(list.Webhooks) != 0 {
		t.Fatalf("after bad input: %+v", list)
	}
	var hook flashsale.Webhook
	res := api.do("POST", "/api/webhooks", adminToken, `{"url": "http://127.0.0.1:9/h", "events": ["order.paid", "order.placed"]}`, &hook)
	if res.StatusCode != 201 || hook.ID == 0 || len(hook.Secret) < 20 || len(hook.Events) != 2 {
		t.Fatalf("create: %d %+v", res.StatusCode, hook)
	}
	if api.do("GET", "/api/webhooks", adminToken, "", &list); len(list.Webhooks) != 1 || list.Webhooks[0].Secret != "" || list.Webhooks[0].URL != hook.URL {
		t.Fatalf("list: %+v", list)
	}
	var all map[string]any // no events: every type, answered as [] (never null)
	if res := api.do("POST", "/api/webhooks", adminToken, `{"url": "http://127.0.0.1:9/all"}`, &all); res.StatusCode != 201 {
		t.Fatalf("create for every type: %d", res.StatusCode)
	}
	if events, ok := all["events"].([]any); !ok || len(events) != 0 {
		t.Fatalf("create for every type: events %#v, want []", all["events"])
	}
	path := fmt.Sprintf("/api/webhooks/%d", hook.ID)
	// Its dead letters, shown with what was sent and why it failed.
	if err := api.db.AddDeadLetter(t.Context(), store.DeadLetter{WebhookID: hook.ID, EventSequence: 7, Body: []byte(`{"id":"evt_7"}`), Attempts: 3, LastError: "500 Internal Server Error"}); err != nil {
		t.Fatal(err)
	}
	var dead struct {
		DeadLetters []flashsale.WebhookDeadLetter `json:"dead_letters"`
	}
	if res := api.do("GET", path+"/dead-letters", adminToken, "", &dead); res.StatusCode != 200 || len(dead.DeadLetters) != 1 ||
		dead.DeadLetters[0].EventID != "evt_7" || string(dead.DeadLetters[0].Event) != `{"id":"evt_7"}` || dead.DeadLetters[0].Attempts != 3 {
		t.Fatalf("dead letters: %d %+v", res.StatusCode, dead)
	}
	for p, want := range map[string]int{path + "/dead-letters?limit=0": 400, path + "/dead-letters?limit=x": 400, "/api/webhooks/12345/dead-letters": 404} {
		if res := api.do("GET", p, adminToken, "", nil); res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", p, res.StatusCode, want)
		}
	}
	if res := api.do("DELETE", path, adminToken, "", nil); res.StatusCode != 204 {
		t.Fatalf("delete: %d", res.StatusCode)
	}
	if res := api.do("DELETE", path, adminToken, "", nil); res.StatusCode != 404 {
		t.Fatalf("delete again: %d, want 404", res.StatusCode)
	}
}
