package httpapi_test

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/auth"
)

type voucherPage struct {
	Vouchers   []map[string]any `json:"vouchers"`
	NextCursor *string          `json:"next_cursor"`
}

// listAll walks GET /api/vouchers page by page and returns the ids in the
// order they came and the number of pages. A voucher created after the
// first page (by between) must not show up in later pages or move them.
func (api *testAPI) listAll(t *testing.T, limit int, between func()) (ids []string, pages int) {
	t.Helper()
	path := fmt.Sprintf("/api/vouchers?limit=%d", limit)
	for {
		var page voucherPage
		if res := api.do("GET", path, "", "", &page); res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		pages++
		if len(page.Vouchers) > limit || pages > 100 {
			t.Fatalf("page %d: %d vouchers for limit %d", pages, len(page.Vouchers), limit)
		}
		for _, v := range page.Vouchers {
			ids = append(ids, v["id"].(string))
		}
		if page.NextCursor == nil {
			return ids, pages
		}
		if *page.NextCursor == "" || len(page.Vouchers) != limit {
			t.Fatalf("page %d: %d vouchers and next_cursor %q; want a full page before a cursor", pages, len(page.Vouchers), *page.NextCursor)
		}
		if pages == 1 && between != nil {
			between()
		}
		path = fmt.Sprintf("/api/vouchers?limit=%d&cursor=%s", limit, url.QueryEscape(*page.NextCursor))
	}
}

// TestListVouchers pages through vouchers newest first with both kinds of
// voucher service, and checks every listed voucher shows the figures GET
// /api/vouchers/{id} shows (with async, Redis's live ones).
func TestListVouchers(t *testing.T) {
	for _, strategyName := range []string{"conditional", "async"} {
		t.Run(strategyName, func(t *testing.T) {
			api := newTestAPI(t, apiOptions{strategy: strategyName})
			var empty voucherPage
			if res := api.do("GET", "/api/vouchers", "", "", &empty); res.StatusCode != 200 || empty.Vouchers == nil || len(empty.Vouchers) != 0 || empty.NextCursor != nil {
				t.Fatalf("empty list: %d %+v; want [] and no cursor", res.StatusCode, empty)
			}
			var created []string
			for i := range 7 {
				created = append(created, api.createVoucher(3+i))
			}
			slices.Reverse(created) // newest first
			if res := api.do("POST", "/api/vouchers/"+created[2]+"/orders", api.userToken(11), "", nil); res.StatusCode != 200 {
				t.Fatalf("order: %d", res.StatusCode)
			}
			tests := []struct{ limit, pages int }{{1, 7}, {3, 3}, {6, 2}, {7, 1}, {20, 1}, {100, 1}}
			for _, tt := range tests {
				ids, pages := api.listAll(t, tt.limit, nil)
				if !slices.Equal(ids, created) || pages != tt.pages {
					t.Fatalf("limit %d: %d pages of %v; want %d pages of %v", tt.limit, pages, ids, tt.pages, created)
				}
			}
			// Vouchers created while a client pages do not shift its pages.
			ids, _ := api.listAll(t, 3, func() { api.createVoucher(1) })
			if !slices.Equal(ids, created) {
				t.Fatalf("paging while a voucher is created: %v; want %v", ids, created)
			}
			var page voucherPage
			api.do("GET", "/api/vouchers", "", "", &page)
			if len(page.Vouchers) != 8 || page.NextCursor != nil {
				t.Fatalf("default page: %d vouchers, cursor %v; want all 8 and no cursor", len(page.Vouchers), page.NextCursor)
			}
			for _, v := range page.Vouchers {
				var one map[string]any
				api.do("GET", "/api/vouchers/"+v["id"].(string), "", "", &one)
				if fmt.Sprint(v) != fmt.Sprint(one) {
					t.Fatalf("listed %v\nGET one %v", v, one)
				}
			}
			if v := page.Vouchers[3]; v["id"] != created[2] || v["remaining"] != float64(6) || v["orders"] != float64(1) {
				t.Fatalf("the ordered voucher is listed as %v; want remaining 6 (stock 7) and 1 order", v)
			}
		})
	}
}

// newListAPI returns a service holding n vouchers and its answer to GET
// /api/vouchers?query.
func newListAPI(t *testing.T, n int, query string) (*testAPI, voucherPage) {
	api := newTestAPI(t, apiOptions{})
	for range n {
		api.createVoucher(1)
	}
	var page voucherPage
	api.do("GET", "/api/vouchers?"+query, "", "", &page)
	return api, page
}

func TestListVouchersDefaultLimit(t *testing.T) {
	api, page := newListAPI(t, 21, "")
	if len(page.Vouchers) != 20 || page.NextCursor == nil {
		t.Fatalf("21 vouchers without a limit: a page of %d, cursor %v; want 20 and a cursor", len(page.Vouchers), page.NextCursor)
	}
	var rest voucherPage
	api.do("GET", "/api/vouchers?cursor="+url.QueryEscape(*page.NextCursor), "", "", &rest)
	if len(rest.Vouchers) != 1 || rest.NextCursor != nil {
		t.Fatalf("second page: %d vouchers, cursor %v; want 1 and none", len(rest.Vouchers), rest.NextCursor)
	}
}

func TestListVouchersRejectsBadInput(t *testing.T) {
	api, page := newListAPI(t, 3, "limit=1")
	real := *page.NextCursor
	tampered := []byte(real)
	tampered[3] ^= 'A' ^ 'B'
	if tampered[3] == real[3] {
		t.Fatal("the tampered cursor is unchanged")
	}
	other, err := auth.New("another-secret-another-secret-another", "")
	if err != nil {
		t.Fatal(err)
	}
	id := binary.BigEndian.AppendUint64(nil, 1)
	tests := []struct {
		name, query, message string
	}{
		{"limit 0", "limit=0", "limit must be a whole number from 1 to 100"},
		{"limit negative", "limit=-1", "limit must be"},
		{"limit over 100", "limit=101", "limit must be"},
		{"limit huge", "limit=99999999999999999999", "limit must be"},
		{"limit not a number", "limit=ten", "limit must be"},
		{"limit fraction", "limit=1.5", "limit must be"},
		{"limit leading zero", "limit=007", "limit must be"},
		{"limit plus sign", "limit=%2B5", "limit must be"},
		{"limit with space", "limit=5%20", "limit must be"},
		{"limit empty", "limit=", "limit must be"},
		{"limit twice", "limit=5&limit=6", `"limit" is given 2 times`},
		{"unknown parameter", "page=2", `unknown query parameter "page"`},
		{"malformed query", "limit=%zz", "malformed"},
		{"cursor empty", "cursor=", "cursor is empty"},
		{"cursor garbage", "cursor=hello", "cursor is not one this service handed out"},
		{"cursor tampered", "cursor=" + url.QueryEscape(string(tampered)), "cursor is not one"},
		{"cursor truncated", "cursor=" + url.QueryEscape(real[:len(real)-2]), "cursor is not one"},
		{"cursor unsigned id", "cursor=" + base64.RawURLEncoding.EncodeToString(id), "cursor is not one"},
		// Sealed as the service seals cursors, with another secret.
		{"cursor forged", "cursor=" + other.Seal("vouchers page v1", id), "cursor is not one"},
		{"cursor of another purpose", "cursor=" + api.auth.Seal("something else", id), "cursor is not one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eb errorBody
			res := api.do("GET", "/api/vouchers?"+tt.query, "", "", &eb)
			wantErrorMessage(t, res, eb, http.StatusBadRequest, flashsale.EInvalid, tt.message)
		})
	}
}
