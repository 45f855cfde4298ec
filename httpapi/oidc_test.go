package httpapi_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/internal/oidctest"
)

// providerKeys are an RSA and a P-256 key of one provider.
func providerKeys(t testing.TB) (*auth.SigningKey, *auth.SigningKey) {
	t.Helper()
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rs, err := auth.NewSigningKey(rk, "")
	if err != nil {
		t.Fatal(err)
	}
	es, err := auth.NewSigningKey(ek, "")
	if err != nil {
		t.Fatal(err)
	}
	return rs, es
}

// oidcAPI is the service trusting a provider (by discovery) that signs
// with rs and es.
func oidcAPI(t *testing.T, strategyName string) (api *testAPI, token func(k *auth.SigningKey, subject string) string, issuer string, keys []*auth.SigningKey) {
	rs, es := providerKeys(t)
	jwks, err := auth.JWKS(rs, es)
	if err != nil {
		t.Fatal(err)
	}
	p := oidctest.Start(t, jwks)
	api = newTestAPI(t, apiOptions{strategy: strategyName, provider: &auth.Provider{Issuer: p.URL, Audience: "flashsale-shop"}})
	n := 0
	token = func(k *auth.SigningKey, subject string) string {
		t.Helper()
		n++ // every token another, as a provider's refreshed tokens are
		tok, err := k.Sign(jwt.MapClaims{"iss": p.URL, "aud": "flashsale-shop", "sub": subject, "jti": n,
			"exp": time.Now().Add(time.Hour).Unix()})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return api, token, p.URL, []*auth.SigningKey{rs, es}
}

// TestProviderBuyers: a provider's subject is one buyer whatever its
// token (one order per buyer, its idempotency keys, its orders to read,
// its waiting-room ticket), two subjects are two buyers, a provider's "5"
// is not HS256's user 5, and the deny list takes subjects as the shop
// knows them.
func TestProviderBuyers(t *testing.T) {
	for _, s := range []string{"conditional", "async"} {
		t.Run(s, func(t *testing.T) { testProviderBuyers(t, s) })
	}
}

func testProviderBuyers(t *testing.T, strategyName string) {
	api, token, issuer, keys := oidcAPI(t, strategyName)
	rs, _ := providerKeys(t) // not the provider's: refused
	vid := api.createVoucher(10)
	first := api.order(token(keys[0], "auth0|alice"), vid, "", "Idempotency-Key", "k1")
	wantOrder(t, first, 1, map[string]string{"async": "pending", "conditional": "created"}[strategyName])
	// Another token of alice (another key): the same answer for her key,
	// and her limit reached for a new key.
	if again := api.order(token(keys[1], "auth0|alice"), vid, "", "Idempotency-Key", "k1"); again.OrderID != first.OrderID {
		t.Fatalf("alice's retry with another token: %+v; want order %s", again, first.OrderID)
	}
	wantRefusal(t, api.order(token(keys[1], "auth0|alice"), vid, "", "Idempotency-Key", "k2"), http.StatusConflict, flashsale.EDuplicateOrder)
	// Bob (and ALICE, another subject) with alice's key: their own orders.
	bob := api.order(token(keys[0], "auth0|bob"), vid, "", "Idempotency-Key", "k1")
	upper := api.order(token(keys[0], "auth0|ALICE"), vid, "", "Idempotency-Key", "k1")
	if bob.OrderID == "" || upper.OrderID == "" || bob.OrderID == first.OrderID || upper.OrderID == first.OrderID {
		t.Fatalf("bob: %+v, ALICE: %+v; want orders of their own", bob, upper)
	}
	// The provider's "5" and HS256's user 5 are two buyers.
	five := api.order(token(keys[0], "5"), vid, "", "Idempotency-Key", "k1")
	hs5 := api.order(api.userToken(5), vid, "", "Idempotency-Key", "k1")
	if five.OrderID == "" || hs5.OrderID == "" || five.OrderID == hs5.OrderID {
		t.Fatalf("provider's 5: %+v, HS256's 5: %+v; want two orders", five, hs5)
	}
	// Alice reads her order with a new token; bob may not.
	if got := api.get(token(keys[1], "auth0|alice"), first.OrderID); got.OrderID != first.OrderID {
		t.Fatalf("alice reads her order: %+v", got)
	}
	wantRefusal(t, api.get(token(keys[0], "auth0|bob"), first.OrderID), http.StatusNotFound, flashsale.ENotFound)
	// The admin maps buyer ids back to subjects (orders and events carry
	// the ids): alice's and the provider's "5" are the provider's, HS256's
	// 5 is itself; an id never given is not found, and a user may not ask.
	for _, c := range []struct{ order, issuer, subject string }{{first.OrderID, issuer, "auth0|alice"}, {five.OrderID, issuer, "5"}, {hs5.OrderID, "", "5"}} {
		o := api.get(adminToken, c.order)
		var b struct {
			UserID  string `json:"user_id"`
			Issuer  string `json:"issuer"`
			Subject string `json:"subject"`
		}
		res, data := api.raw("GET", "/api/buyers/"+o.UserID, adminToken, "")
		if err := json.Unmarshal(data, &b); res.StatusCode != http.StatusOK || err != nil || b.UserID != o.UserID || b.Issuer != c.issuer || b.Subject != c.subject {
			t.Fatalf("GET /api/buyers/%s: %d %s; want issuer %q, subject %q", o.UserID, res.StatusCode, data, c.issuer, c.subject)
		}
	}
	for path, want := range map[string]int{"/api/buyers/" + strconv.FormatInt(auth.BuyerBase+1_000_000, 10): http.StatusNotFound, "/api/buyers/x": http.StatusBadRequest} {
		if res, data := api.raw("GET", path, adminToken, ""); res.StatusCode != want {
			t.Fatalf("GET %s: %d %s; want %d", path, res.StatusCode, data, want)
		}
	}
	if res, _ := api.raw("GET", "/api/buyers/5", token(keys[0], "auth0|alice"), ""); res.StatusCode != http.StatusForbidden {
		t.Fatalf("a buyer's GET /api/buyers: %d; want 403", res.StatusCode)
	}
	// A key the provider does not publish.
	wantRefusal(t, api.order(token(rs, "auth0|carol"), vid, ""), http.StatusUnauthorized, flashsale.EUnauthorized)
	// Mallory denied by her subject before she ever signed in.
	body := `{"users":[],"ips":[],"subjects":[{"issuer":"` + issuer + `","subject":"auth0|mallory"}]}`
	if res, data := api.raw("PUT", "/api/denylist", adminToken, body); res.StatusCode != http.StatusOK || !strings.Contains(string(data), `"user":"`) {
		t.Fatalf("PUT deny list: %d %s", res.StatusCode, data)
	}
	wantRefusal(t, api.order(token(keys[0], "auth0|mallory"), vid, ""), http.StatusForbidden, flashsale.EDenied)
	if res, data := api.raw("PUT", "/api/denylist", adminToken, `{"users":[],"ips":[],"subjects":[{"issuer":"https://elsewhere","subject":"x"}]}`); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("PUT deny list of another issuer: %d %s; want 400", res.StatusCode, data)
	}
}

// TestProviderTickets: a waiting-room ticket is its buyer's, whatever
// token the buyer polls it with, and no other buyer's.
func TestProviderTickets(t *testing.T) {
	api, token, _, keys := oidcAPI(t, "conditional")
	vid := api.createQueueVoucher(5, 100)
	var tk ticketView
	if res := api.do("POST", "/api/vouchers/"+vid+"/queue", token(keys[0], "alice"), "", &tk); res.StatusCode != http.StatusOK {
		t.Fatalf("join: %d", res.StatusCode)
	}
	var again ticketView
	if res := api.do("GET", "/api/vouchers/"+vid+"/queue/"+tk.Ticket, token(keys[1], "alice"), "", &again); res.StatusCode != http.StatusOK {
		t.Fatalf("alice polls with another token: %d", res.StatusCode)
	}
	if res := api.do("GET", "/api/vouchers/"+vid+"/queue/"+tk.Ticket, token(keys[0], "bob"), "", nil); res.StatusCode == http.StatusOK {
		t.Fatal("bob polls alice's ticket: 200")
	}
}

// TestProviderRotationMidSale: an async sale runs while the provider
// rotates its key: the new key published beside the old, buyers' tokens of
// both keys ordering at once (the new kid unknown until one read of the
// keys), then the old key withdrawn. No order is refused with 401, and
// every buyer gets exactly one order.
func TestProviderRotationMidSale(t *testing.T) {
	oldKey, _ := providerKeys(t)
	newKey, _ := providerKeys(t)
	jwks, _ := auth.JWKS(oldKey)
	p := oidctest.Start(t, jwks)
	api := newTestAPI(t, apiOptions{strategy: "async", provider: &auth.Provider{Issuer: p.URL, Audience: "shop", Refresh: time.Hour}})
	vid := api.createVoucher(100)
	sign := func(k *auth.SigningKey, b int) string {
		tok, err := k.ProviderToken(p.URL, "shop", "buyer-"+strconv.Itoa(b), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	orders := make([]string, 60)
	buy := func(k *auth.SigningKey, from, to int) {
		var wg sync.WaitGroup
		for b := from; b < to; b++ {
			wg.Go(func() {
				for range 3 { // clicks: the first orders, the others are duplicate_order
					a := api.order(sign(k, b), vid, "")
					switch {
					case a.Code == http.StatusOK:
						orders[b] = a.OrderID
					case a.Error.Code != flashsale.EDuplicateOrder:
						t.Errorf("buyer %d, kid %s: %+v", b, k.KID, a)
					}
				}
			})
		}
		wg.Wait()
	}
	buy(oldKey, 0, 20)
	both, _ := auth.JWKS(oldKey, newKey)
	p.SetJWKS(both) // the overlap
	var wg sync.WaitGroup
	wg.Go(func() { buy(newKey, 20, 40) })
	wg.Go(func() { buy(oldKey, 40, 50) })
	wg.Wait()
	only, _ := auth.JWKS(newKey)
	p.SetJWKS(only)
	buy(newKey, 50, 60)
	for b, o := range orders {
		if o == "" {
			t.Errorf("buyer %d has no order", b)
		}
	}
	if got := api.auth.Stats().Refused["unknown_kid"]; got != 0 {
		t.Errorf("%d tokens refused for their kid during the rotation", got)
	}
}
