package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

// TestPathIDsMustBeCanonical refuses every spelling of an id but the
// canonical one, on every route that takes one, even when the loose
// reading names a voucher or order that exists.
func TestPathIDsMustBeCanonical(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createVoucher(5)
	tok := api.userToken(1)
	var placed struct {
		OrderID string `json:"order_id"`
	}
	if res := api.do("POST", "/api/vouchers/"+vid+"/orders", tok, "", &placed); res.StatusCode != 200 {
		t.Fatalf("order: %d", res.StatusCode)
	}
	routes := []struct{ method, path, token string }{
		{"GET", "/api/vouchers/%s", ""},
		{"POST", "/api/vouchers/%s/orders", api.userToken(2)},
		{"GET", "/api/orders/%s", tok},
	}
	ids := []struct{ name, voucher, order string }{
		{"plus sign", "+" + vid, "+" + placed.OrderID},
		{"leading zeros", "00" + vid, "0" + placed.OrderID},
		{"+7", "+7", "+7"},
		{"007", "007", "007"},
		{"-1", "-1", "-1"},
		{"0", "0", "0"},
		{"past int64", "9223372036854775808", "9223372036854775808"},
		{"fraction", vid + ".0", placed.OrderID + ".0"},
	}
	for _, rt := range routes {
		for _, id := range ids {
			t.Run(rt.method+" "+rt.path+" "+id.name, func(t *testing.T) {
				s := id.voucher
				if strings.HasPrefix(rt.path, "/api/orders/") {
					s = id.order
				}
				var eb errorBody
				res := api.do(rt.method, strings.Replace(rt.path, "%s", s, 1), rt.token, "", &eb)
				wantErrorMessage(t, res, eb, http.StatusBadRequest, flashsale.EInvalid, "positive decimal integer, without sign or leading zeros")
			})
		}
	}
	if a, err := api.db.AuditVoucher(context.Background(), mustID(t, vid)); err != nil || a.Orders != 1 {
		t.Fatalf("audit %+v, %v; want only the first order", a, err)
	}
}

// TestTokenClaimsMustBeCanonical refuses user tokens whose subject is not
// a canonical user id or whose exp is not a JSON number.
func TestTokenClaimsMustBeCanonical(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	vid := api.createVoucher(5)
	future := time.Now().Add(time.Hour).Unix()
	tests := []struct {
		name   string
		claims jwt.MapClaims
	}{
		{"sub +7", jwt.MapClaims{"sub": "+7", "exp": future}},
		{"sub 007", jwt.MapClaims{"sub": "007", "exp": future}},
		{"sub -1", jwt.MapClaims{"sub": "-1", "exp": future}},
		{"sub 0", jwt.MapClaims{"sub": "0", "exp": future}},
		{"sub past int64", jwt.MapClaims{"sub": "9223372036854775808", "exp": future}},
		{"exp as a string", jwt.MapClaims{"sub": "7", "exp": "9999999999"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, tt.claims).SignedString([]byte(secret))
			if err != nil {
				t.Fatal(err)
			}
			var eb errorBody
			res := api.do("POST", "/api/vouchers/"+vid+"/orders", tok, "", &eb)
			wantError(t, res, eb, http.StatusUnauthorized, flashsale.EUnauthorized)
		})
	}
	if a, err := api.db.AuditVoucher(context.Background(), mustID(t, vid)); err != nil || a.Orders != 0 {
		t.Fatalf("audit %+v, %v; want no order", a, err)
	}
}

// TestCreateVoucherRefusesBadTitlesAndNumbers checks the messages for
// titles that would not display as stored and for numbers that are not
// whole or do not fit, and that none of them stores a voucher.
func TestCreateVoucherRefusesBadTitlesAndNumbers(t *testing.T) {
	api := newTestAPI(t, apiOptions{})
	const window = `"begin_time":"2026-01-01T00:00:00Z","end_time":"2026-01-02T00:00:00Z"`
	withTitle := func(title string) string { return `{"title":"` + title + `","stock":1,` + window + `}` }
	withStock := func(stock string) string { return `{"title":"x","stock":` + stock + `,` + window + `}` }
	tests := []struct {
		name, body, message string
	}{
		{"NUL escaped", withTitle(`a\u0000b`), "control character U+0000"},
		{"NUL raw", withTitle("a\x00b"), "not valid JSON"},
		{"newline", withTitle(`a\nb`), "control character U+000A"},
		{"tab", withTitle(`a\tb`), "control character U+0009"},
		{"C1 control", withTitle(`a\u0085b`), "control character U+0085"},
		{"bidi override", withTitle("a\u202eb"), "bidirectional control character U+202E"},
		{"bidi override escaped", withTitle(`a\u202Eb`), "bidirectional control character U+202E"},
		{"bidi isolate", withTitle(`a\u2067b`), "bidirectional control character U+2067"},
		{"invalid UTF-8", withTitle("a\xffb"), "not valid UTF-8 (at byte 11)"},
		{"truncated UTF-8", withTitle("a\xe7\xa7"), "not valid UTF-8"},
		{"unpaired surrogate", withTitle(`a\ud800b`), "U+FFFD"},
		{"too long", withTitle(strings.Repeat("秒", 86)), "longer than 255 bytes"},
		{"stock 1.5", withStock("1.5"), `field "stock" must be a whole number`},
		{"stock 1e3", withStock("1e3"), `field "stock" must be a whole number`},
		{"stock 2.0", withStock("2.0"), `field "stock" must be a whole number`},
		{"stock past int64", withStock("99999999999999999999"), `field "stock" is out of range`},
		{"stock below int64", withStock("-99999999999999999999"), `field "stock" is out of range`},
		{"stock as string", withStock(`"5"`), `field "stock" must be a JSON number (a whole number)`},
		{"pay_value 0.5", `{"title":"x","stock":1,"pay_value":0.5,` + window + `}`, `field "pay_value" must be a whole number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var eb errorBody
			res := api.do("POST", "/api/vouchers", adminToken, tt.body, &eb)
			wantErrorMessage(t, res, eb, http.StatusBadRequest, flashsale.EInvalid, tt.message)
		})
	}
	if vs, err := api.db.ListVouchers(context.Background()); err != nil || len(vs) != 0 {
		t.Fatalf("refused bodies stored %d vouchers, %v", len(vs), err)
	}
	// What is refused above is not everything unusual: these are fine.
	for _, title := range []string{"秒杀 🎉 ünïcödé", `a\u200fb`, strings.Repeat("x", 255)} {
		var created struct{ ID string }
		if res := api.do("POST", "/api/vouchers", adminToken, withTitle(title), &created); res.StatusCode != http.StatusCreated {
			t.Fatalf("title %q: %d", title, res.StatusCode)
		}
	}
}
