package httpapi_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/internal/oidctest"
)

// BenchmarkProviderSale is BenchmarkHotVoucher's async sale shape (stock
// 1,000, every buyer clicking five times) with the buyers' tokens signed
// by an identity provider, RS256, ES256 or EdDSA, beside the same sale
// with HS256 tokens, in one run; and the worst case, RS256/new: every
// request a new buyer's token, so every one is verified and its subject
// numbered in MySQL; and RS256/known, the sale shape with every buyer
// numbered before (another sale's buyers: the subject cache knows them).
// Compare the ratio (attempts/s over /healthz/s of the
// same server) and cpu-µs/attempt between the sub-benchmarks. Each case
// runs once, so the machine's load between cases skews the comparison:
// BenchmarkProviderRatio pairs the sales instead.
func BenchmarkProviderSale(b *testing.B) {
	rs, es, ed, p, provider := benchProvider(b)
	warmUp(b, newTestAPI(b, apiOptions{strategy: "async", provider: provider}))
	for _, c := range []struct {
		name  string
		key   *auth.SigningKey // nil: HS256
		users func(n int) int
		known bool // the buyers numbered before the run
	}{
		{"HS256", nil, func(n int) int { return max(n/5, 1) }, false},
		{"RS256", rs, func(n int) int { return max(n/5, 1) }, false},
		{"RS256/known", rs, func(n int) int { return max(n/5, 1) }, true},
		{"ES256", es, func(n int) int { return max(n/5, 1) }, false},
		{"EdDSA", ed, func(n int) int { return max(n/5, 1) }, false},
		{"RS256/new", rs, func(n int) int { return n }, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			api := newTestAPI(b, apiOptions{strategy: "async", provider: provider})
			tokens := make([]string, c.users(b.N))
			for i := range tokens {
				if c.key == nil {
					tokens[i] = api.userToken(int64(i + 1))
					continue
				}
				tok, err := c.key.Sign(jwt.MapClaims{"iss": p.URL, "aud": "flashsale-shop", "sub": "buyer-" + strconv.Itoa(i),
					"exp": time.Now().Add(time.Hour).Unix()})
				if err != nil {
					b.Fatal(err)
				}
				tokens[i] = tok
				if c.known {
					if _, err := api.auth.Buyer(b.Context(), p.URL, "buyer-"+strconv.Itoa(i)); err != nil {
						b.Fatal(err)
					}
				}
			}
			vid := api.createVoucher(1000)
			runtime.GC() // not the garbage of the tokens' signing
			benchOrdersTokens(b, api, vid, tokens)
		})
	}
}

// benchProvider starts a provider signing with an RS256, an ES256 and an
// EdDSA key, and returns the keys, the provider and the configuration
// that trusts it.
func benchProvider(b *testing.B) (rs, es, ed *auth.SigningKey, p *oidctest.Provider, provider *auth.Provider) {
	rs, es = providerKeys(b)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	ed, err := auth.NewSigningKey(edKey, "")
	if err != nil {
		b.Fatal(err)
	}
	jwks, err := auth.JWKS(rs, es, ed)
	if err != nil {
		b.Fatal(err)
	}
	p = oidctest.Start(b, jwks)
	return rs, es, ed, p, &auth.Provider{Issuer: p.URL, Audience: "flashsale-shop"}
}

// warmUp runs a sale no case counts, so that the first case does not pay
// alone for what the process's first sale pays (the heap's growth, the
// first connections to MySQL and Redis, lazily built state).
func warmUp(b *testing.B, api *testAPI) {
	vid := api.createVoucher(1000)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchConcurrency, MaxConnsPerHost: benchConcurrency}}
	hammerHTTP(b, client, 0, 5000, func(i int) (*http.Request, error) {
		req, err := http.NewRequest(http.MethodPost, api.url+"/api/vouchers/"+vid+"/orders", nil)
		if err == nil {
			req.Header.Set("Authorization", "Bearer "+api.userToken(int64(i%1000+1)))
		}
		return req, err
	})
	client.CloseIdleConnections()
}
