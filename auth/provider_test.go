package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale/internal/oidctest"
	"github.com/flashsale/flashsale/store"
)

// testProvider is an identity provider over real HTTP publishing keys.
type testProvider struct {
	*oidctest.Provider
	t testing.TB
}

func newTestProvider(t testing.TB, keys ...*SigningKey) *testProvider {
	t.Helper()
	b, err := JWKS(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return &testProvider{Provider: oidctest.Start(t, b), t: t}
}

func (p *testProvider) setKeys(keys ...*SigningKey) {
	b, err := JWKS(keys...)
	if err != nil {
		p.t.Fatal(err)
	}
	p.SetJWKS(b)
}

// testKeys are generated once: RSA generation is slow under -race.
var testKeys = sync.OnceValue(func() map[string]*SigningKey {
	rsa1, _ := rsa.GenerateKey(rand.Reader, 2048)
	rsa2, _ := rsa.GenerateKey(rand.Reader, 2048)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	m := map[string]*SigningKey{}
	for name, k := range map[string]struct {
		key any
		alg string
	}{"rs": {rsa1, "RS256"}, "ps": {rsa1, "PS256"}, "rs2": {rsa2, "RS256"}, "es": {ec, "ES256"}, "ed": {ed, "EdDSA"}} {
		sk, err := NewSigningKey(k.key, k.alg)
		if err != nil {
			panic(err)
		}
		m[name] = sk
	}
	m["ps"].KID += "-ps" // one RSA key published twice, once per alg
	return m
})

// testBuyerStore is a real store of buyer ids: a SQLite file.
func testBuyerStore(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "buyers.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

const testAudience = "flashsale"

// providerAuth is an Authenticator that trusts p (by discovery) with the
// buyers in db.
func providerAuth(t testing.TB, p *testProvider, db BuyerStore, opts ...func(*Provider)) *Authenticator {
	t.Helper()
	a := newAuth(t)
	cfg := Provider{Issuer: p.URL, Audience: testAudience}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := a.UseProvider(ctx, cfg, db); err != nil {
		t.Fatal(err)
	}
	return a
}

// claims are a provider's usual claims for subject, valid for an hour.
func claims(p *testProvider, subject string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": p.URL, "aud": []string{testAudience, "account"}, "sub": subject,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

func mustSign(t testing.TB, k *SigningKey, c jwt.Claims) string {
	t.Helper()
	tok, err := k.Sign(c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
