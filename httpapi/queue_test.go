package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// ticketView is the answer of the queue routes.
type ticketView struct {
	Ticket     string `json:"ticket"`
	State      string `json:"state"`
	Position   int64  `json:"position"`
	ETASeconds int64  `json:"eta_seconds"`
	Pass       string `json:"pass"`
}

// createQueueVoucher creates a queue voucher on sale now.
func (api *testAPI) createQueueVoucher(stock, rate int) string {
	api.t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	body := fmt.Sprintf(`{"title":"queued","stock":%d,"begin_time":%q,"end_time":%q,"admission":"queue","admit_per_second":%d}`,
		stock, time.Now().Add(-time.Minute).Format(time.RFC3339), time.Now().Add(time.Hour).Format(time.RFC3339), rate)
	if res := api.do("POST", "/api/vouchers", adminToken, body, &out); res.StatusCode != http.StatusCreated {
		api.t.Fatalf("create queue voucher: %d", res.StatusCode)
	}
	return out.ID
}

func (api *testAPI) join(vid string, user int64) ticketView {
	api.t.Helper()
	var tk ticketView
	if res := api.do("POST", "/api/vouchers/"+vid+"/queue", api.userToken(user), "", &tk); res.StatusCode != http.StatusOK {
		api.t.Fatalf("join: %d", res.StatusCode)
	}
	return tk
}

func (api *testAPI) pollTicket(vid string, user int64, ticket string) ticketView {
	api.t.Helper()
	var tk ticketView
	if res := api.do("GET", "/api/vouchers/"+vid+"/queue/"+ticket, api.userToken(user), "", &tk); res.StatusCode != http.StatusOK {
		api.t.Fatalf("poll: %d", res.StatusCode)
	}
	return tk
}

// waitState polls the ticket until it reads state (10 s at most).
func (api *testAPI) waitState(vid string, user int64, ticket, state string) ticketView {
	api.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tk := api.pollTicket(vid, user, ticket)
		if tk.State == state {
			return tk
		}
		if time.Now().After(deadline) {
			api.t.Fatalf("ticket of user %d reads %q, not %q, after 10 s", user, tk.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// orderWithPass places an order of the voucher with the pass header.
func (api *testAPI) orderWithPass(vid string, user int64, pass string) (*http.Response, errorBody) {
	api.t.Helper()
	h := http.Header{"Authorization": {"Bearer " + api.userToken(user)}}
	if pass != "" {
		h.Set("Flashsale-Pass", pass)
	}
	var body errorBody
	res, data := api.send("POST", "/api/vouchers/"+vid+"/orders", h, strings.NewReader(""))
	_ = decodeBytes(data, &body)
	return res, body
}

func TestQueueVoucherNeedsAPass(t *testing.T) {
	for _, s := range []string{"conditional", "async"} {
		t.Run(s, func(t *testing.T) { testQueueVoucherNeedsAPass(t, s) })
	}
}

func testQueueVoucherNeedsAPass(t *testing.T, strategyName string) {
	api := newTestAPI(t, apiOptions{strategy: strategyName})
	vid := api.createQueueVoucher(5, 100)
	var v struct {
		Admission      string `json:"admission"`
		AdmitPerSecond int    `json:"admit_per_second"`
	}
	api.do("GET", "/api/vouchers/"+vid, "", "", &v)
	if v.Admission != "queue" || v.AdmitPerSecond != 100 {
		t.Fatalf("GET shows admission %q at %d/s", v.Admission, v.AdmitPerSecond)
	}
	res, body := api.orderWithPass(vid, 1, "")
	wantError(t, res, body, http.StatusForbidden, "pass_required")

	tk := api.join(vid, 1)
	if tk.State != "waiting" || tk.Ticket == "" || tk.Position < 1 {
		t.Fatalf("join: %+v", tk)
	}
	other := api.join(vid, 2)
	tk = api.waitState(vid, 1, tk.Ticket, "admitted")
	pass2 := api.waitState(vid, 2, other.Ticket, "admitted").Pass
	forged := tk.Pass[:len(tk.Pass)-2] + "AA"
	for name, pass := range map[string]string{"foreign": pass2, "forged": forged, "garbage": "x.y.z"} {
		res, body := api.orderWithPass(vid, 1, pass)
		if res.StatusCode != http.StatusForbidden || body.Error.Code != "pass_invalid" {
			t.Errorf("%s pass: %d %s, want 403 pass_invalid", name, res.StatusCode, body.Error.Code)
		}
	}
	if res, _ := api.orderWithPass(vid, 1, tk.Pass); res.StatusCode != http.StatusOK {
		t.Fatalf("order with the pass: %d", res.StatusCode)
	}
	res, body = api.orderWithPass(vid, 1, tk.Pass)
	wantError(t, res, body, http.StatusForbidden, "pass_invalid")
	// The ticket of a spent pass stays admitted; an open voucher needs none.
	if got := api.pollTicket(vid, 1, tk.Ticket); got.State != "admitted" {
		t.Errorf("after the order the ticket reads %q", got.State)
	}
	if res, _ := api.orderWithPass(api.createVoucher(1), 1, ""); res.StatusCode != http.StatusOK {
		t.Errorf("open voucher without a pass: %d", res.StatusCode)
	}
}

// One pass sent many times at once to two instances buys once.
func TestPassIsSingleUseAcrossInstances(t *testing.T) {
	a := newTestAPI(t, apiOptions{})
	b := newTestAPI(t, apiOptions{share: a})
	vid := a.createQueueVoucher(10, 100)
	pass := a.waitState(vid, 7, a.join(vid, 7).Ticket, "admitted").Pass
	var ok, invalid atomic.Int64
	var wg sync.WaitGroup
	for i := range 20 {
		api := []*testAPI{a, b}[i%2]
		wg.Go(func() {
			res, body := api.orderWithPass(vid, 7, pass)
			switch {
			case res.StatusCode == http.StatusOK:
				ok.Add(1)
			case body.Error.Code == "pass_invalid":
				invalid.Add(1)
			default:
				t.Errorf("order: %d %s", res.StatusCode, body.Error.Code)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || invalid.Load() != 19 {
		t.Fatalf("%d orders accepted, %d pass_invalid; want 1 and 19", ok.Load(), invalid.Load())
	}
}

// A pass that expires unused reads expired, is refused, and its unit goes
// to the next in line.
func TestExpiredPassGivesItsPlaceBack(t *testing.T) {
	api := newTestAPI(t, apiOptions{passTTL: time.Second})
	vid := api.createQueueVoucher(1, 100)
	first := api.join(vid, 1)
	pass := api.waitState(vid, 1, first.Ticket, "admitted").Pass
	second := api.join(vid, 2)
	if got := api.pollTicket(vid, 2, second.Ticket); got.State != "waiting" {
		t.Fatalf("with one unit and one pass out, the second reads %q", got.State)
	}
	api.waitState(vid, 1, first.Ticket, "expired")
	res, body := api.orderWithPass(vid, 1, pass)
	wantError(t, res, body, http.StatusForbidden, "pass_invalid")
	pass2 := api.waitState(vid, 2, second.Ticket, "admitted").Pass
	if res, _ := api.orderWithPass(vid, 2, pass2); res.StatusCode != http.StatusOK {
		t.Fatalf("order with the second pass: %d", res.StatusCode)
	}
}

// Once the units are gone every waiting ticket reads sold_out within 2 s.
func TestWaitingTicketsReadSoldOut(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createQueueVoucher(2, 100)
	tickets := map[int64]string{}
	for u := int64(1); u <= 12; u++ {
		tickets[u] = api.join(vid, u).Ticket
	}
	for u := int64(1); u <= 2; u++ { // the first two are admitted and buy
		pass := api.waitState(vid, u, tickets[u], "admitted").Pass
		if res, _ := api.orderWithPass(vid, u, pass); res.StatusCode != http.StatusOK {
			t.Fatalf("order %d: %d", u, res.StatusCode)
		}
	}
	soldAt := time.Now()
	for u := int64(3); u <= 12; u++ {
		api.waitState(vid, u, tickets[u], "sold_out")
	}
	if d := time.Since(soldAt); d > 2*time.Second {
		t.Errorf("the waiting tickets read sold_out after %v", d)
	}
}

func TestDenyList(t *testing.T) {
	api := newTestAPI(t, apiOptions{trustProxy: true})
	vid := api.createVoucher(10)
	res, _ := api.raw("PUT", "/api/denylist", api.userToken(1), `{"users":[],"ips":[]}`)
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a user's PUT: %d", res.StatusCode)
	}
	res, _ = api.raw("PUT", "/api/denylist", adminToken, `{"users":["x"],"ips":[]}`)
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad user id: %d", res.StatusCode)
	}
	res, _ = api.raw("PUT", "/api/denylist", adminToken, `{"users":["5"],"ips":["198.51.100.0/24"]}`)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %d", res.StatusCode)
	}
	var got struct{ Users, IPs []string }
	api.do("GET", "/api/denylist", adminToken, "", &got)
	if fmt.Sprint(got.Users, got.IPs) != "[5] [198.51.100.0/24]" {
		t.Fatalf("GET: %v %v", got.Users, got.IPs)
	}
	order := func(user int64, ip string) (*http.Response, errorBody) {
		h := http.Header{"Authorization": {"Bearer " + api.userToken(user)}, "X-Forwarded-For": {ip}}
		var body errorBody
		res, data := api.send("POST", "/api/vouchers/"+vid+"/orders", h, strings.NewReader(""))
		_ = decodeBytes(data, &body)
		return res, body
	}
	res, body := order(5, "192.0.2.1")
	wantError(t, res, body, http.StatusForbidden, "denied")
	res, body = order(6, "198.51.100.77")
	wantError(t, res, body, http.StatusForbidden, "denied")
	if res, _ := order(6, "192.0.2.1"); res.StatusCode != http.StatusOK {
		t.Fatalf("an allowed buyer: %d", res.StatusCode)
	}
	res, _ = api.raw("POST", "/api/vouchers/"+vid+"/queue", api.userToken(5), "")
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("a denied user joins: %d", res.StatusCode)
	}
}

func TestQueueVoucherRejectsBadInput(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	begin, end := time.Now().Format(time.RFC3339), time.Now().Add(time.Hour).Format(time.RFC3339)
	for _, extra := range []string{`"admission":"lottery"`, `"admission":"queue"`, `"admission":"queue","admit_per_second":0`,
		`"admission":"queue","admit_per_second":100001`, `"admit_per_second":5`, `"admission":"queue","admit_per_second":1.5`} {
		body := fmt.Sprintf(`{"title":"t","stock":1,"begin_time":%q,"end_time":%q,%s}`, begin, end, extra)
		res, eb := api.raw("POST", "/api/vouchers", adminToken, body)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(eb), `"invalid"`) {
			t.Errorf("%s: %d %s", extra, res.StatusCode, eb)
		}
	}
	vid := api.createVoucher(1)
	res, _ := api.raw("POST", "/api/vouchers/"+vid+"/queue", api.userToken(1), "")
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("joining an open voucher: %d", res.StatusCode)
	}
	qid := api.createQueueVoucher(1, 10)
	tk := api.join(qid, 1)
	res, _ = api.raw("GET", "/api/vouchers/"+qid+"/queue/"+tk.Ticket, api.userToken(2), "")
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("another user's ticket: %d", res.StatusCode)
	}
}

func decodeBytes(data []byte, out any) error { return json.Unmarshal(data, out) }

// A deny list set on one instance holds on another within a second: every
// request the other instance starts a second after the PUT answered is
// refused, though it had read the list (empty) just before.
func TestDenyListAcrossInstances(t *testing.T) {
	a := newTestAPI(t, apiOptions{})
	b := newTestAPI(t, apiOptions{share: a})
	vid := a.createVoucher(1000)
	order := func(api *testAPI, user int64) int {
		res, _ := api.raw("POST", "/api/vouchers/"+vid+"/orders", api.userToken(user), "")
		return res.StatusCode
	}
	if got := order(b, 9); got != http.StatusOK {
		t.Fatalf("before the deny list: %d", got)
	}
	if res, _ := a.raw("PUT", "/api/denylist", adminToken, `{"users":["9","10"],"ips":[]}`); res.StatusCode != http.StatusOK {
		t.Fatalf("PUT: %d", res.StatusCode)
	}
	set := time.Now()
	if got := order(a, 10); got != http.StatusForbidden {
		t.Fatalf("on the instance that set it: %d", got)
	}
	for u := int64(100); time.Since(set) < 2*time.Second; u++ {
		start := time.Now()
		got := order(b, 10)
		if start.Sub(set) > time.Second && got != http.StatusForbidden {
			t.Fatalf("a request %v after the deny list was set: %d", start.Sub(set), got)
		}
		if order(b, u) == http.StatusForbidden {
			t.Fatalf("user %d, not on the list, refused", u)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
