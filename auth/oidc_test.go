package auth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

// TestProviderAccepts: RS256, PS256, ES256 and EdDSA tokens of the
// provider are accepted, each key picked by its kid; one subject is one
// buyer whatever the key, from BuyerBase up, and another subject another.
func TestProviderAccepts(t *testing.T) {
	k := testKeys()
	p := newTestProvider(t, k["rs"], k["ps"], k["es"], k["ed"])
	a := providerAuth(t, p, testBuyerStore(t))
	var first int64
	for _, name := range []string{"rs", "ps", "es", "ed"} {
		id, err := a.User(mustSign(t, k[name], claims(p, "2f6c1c62-auth0|5f")))
		if err != nil {
			t.Fatalf("%s: User = %v", k[name].Alg, err)
		}
		if first == 0 {
			first = id
		}
		if id != first || id <= BuyerBase {
			t.Fatalf("%s: User = %d; want %d, above BuyerBase", k[name].Alg, id, first)
		}
	}
	other, err := a.User(mustSign(t, k["rs"], claims(p, "2f6c1c62-auth0|5F")))
	if err != nil || other == first || other <= BuyerBase {
		t.Fatalf("another subject: User = %d, %v; want a buyer other than %d", other, err, first)
	}
	// An HS256 token of ours still works beside the provider.
	hs, _ := a.UserToken(5, time.Hour)
	if id, err := a.User(hs); err != nil || id != 5 {
		t.Fatalf("HS256 beside a provider: User = %d, %v; want 5", id, err)
	}
}

// TestProviderRefuses: every refusal of a provider's token is a 401 with
// its own message and its own label in Stats.
func TestProviderRefuses(t *testing.T) {
	k := testKeys()
	p := newTestProvider(t, k["rs"], k["es"])
	a := providerAuth(t, p, testBuyerStore(t), func(c *Provider) { c.UnknownKIDEvery = time.Hour })
	with := func(f func(jwt.MapClaims)) jwt.MapClaims {
		c := claims(p, "buyer-1")
		f(c)
		return c
	}
	pubDER, _ := x509.MarshalPKIXPublicKey(k["rs"].Key.Public())
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hmacWith := func(key []byte) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(p, "buyer-1"))
		tok.Header["kid"] = k["rs"].KID
		s, _ := tok.SignedString(key)
		return s
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, claims(p, "buyer-1")).SignedString(jwt.UnsafeAllowNoneSignatureType)
	// noneCased writes a token's alg as "None", which golang-jwt does not know.
	noneCased := func(tok string) string {
		head, rest, _ := strings.Cut(tok, ".")
		b, _ := base64.RawURLEncoding.DecodeString(head)
		return base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(b), `"none"`, `"None"`, 1))) + "." + rest
	}
	noKID, _ := jwt.NewWithClaims(jwt.SigningMethodRS256, claims(p, "buyer-1")).SignedString(k["rs"].Key)
	forged := *k["rs"]
	forged.KID = "forged"
	mismatch := *k["es"]
	mismatch.KID = k["rs"].KID // an EC signature naming the RSA key
	valid := mustSign(t, k["rs"], claims(p, "buyer-1"))
	cases := []struct{ name, token, label, msg string }{
		{"alg none", none, "alg_none", "not signed (alg none)"},
		{"alg None", noneCased(none), "alg_none", "not signed (alg none)"},
		{"HS256 signed with the provider's public key", hmacWith(pubPEM), "alg_confusion", "HMAC"},
		{"HS256 signed with our secret, provider's iss", hmacWith([]byte(testSecret)), "alg_confusion", "HMAC"},
		{"no kid", noKID, "no_kid", "names no key (kid)"},
		{"unknown kid", mustSign(t, &forged, claims(p, "buyer-1")), "unknown_kid", "not among the identity provider's keys"},
		{"EC signature naming an RSA key", mustSign(t, &mismatch, claims(p, "buyer-1")), "key_mismatch", "does not fit"},
		{"signature altered", valid[:len(valid)-8] + "AAAAAAAA", "invalid", "not valid"},
		{"expired past the leeway", mustSign(t, k["rs"], with(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-Leeway - 2*time.Second).Unix() })), "expired", "expired"},
		{"no exp", mustSign(t, k["rs"], with(func(c jwt.MapClaims) { delete(c, "exp") })), "no_expiry", "no expiry"},
		{"nbf ahead past the leeway", mustSign(t, k["rs"], with(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(time.Minute).Unix() })), "not_yet_valid", "not valid yet"},
		{"another issuer", mustSign(t, k["rs"], with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" })), "issuer", "issuer (iss) is not trusted"},
		{"another audience", mustSign(t, k["rs"], with(func(c jwt.MapClaims) { c["aud"] = "someone-else" })), "audience", "(aud)"},
		{"no audience", mustSign(t, k["rs"], with(func(c jwt.MapClaims) { delete(c, "aud") })), "audience", "(aud)"},
		{"no subject", mustSign(t, k["rs"], with(func(c jwt.MapClaims) { delete(c, "sub") })), "subject", "sub claim"},
		{"subject too long", mustSign(t, k["rs"], with(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("x", MaxSubjectLen+1) })), "subject", "sub claim"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			before := a.Stats().Refused[tt.label]
			id, err := a.User(tt.token)
			if flashsale.ErrorCode(err) != flashsale.EUnauthorized || !strings.Contains(flashsale.ErrorMessage(err), tt.msg) {
				t.Fatalf("User = %d, %v; want unauthorized mentioning %q", id, err, tt.msg)
			}
			if got := a.Stats().Refused[tt.label]; got != before+1 {
				t.Fatalf("Refused[%q] = %d; want %d", tt.label, got, before+1)
			}
		})
	}
	// Within the leeway, an expired token and one not yet valid pass.
	for _, c := range []jwt.MapClaims{
		with(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-Leeway / 2).Unix() }),
		with(func(c jwt.MapClaims) { c["nbf"] = time.Now().Add(Leeway / 2).Unix() }),
	} {
		if _, err := a.User(mustSign(t, k["rs"], c)); err != nil {
			t.Errorf("within the leeway: User = %v", err)
		}
	}
}

// TestProviderUnknownKIDRateLimited: a flood of tokens naming forged kids
// reads the provider's keys once, not once per token; and a kid the
// provider starts publishing is found by that one read.
func TestProviderUnknownKIDRateLimited(t *testing.T) {
	k := testKeys()
	p := newTestProvider(t, k["rs"])
	a := providerAuth(t, p, testBuyerStore(t)) // DefaultUnknownKIDEvery
	reads := p.Reads.Load()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			f := *k["rs"]
			f.KID = "forged-" + string(rune('a'+i%26)) + time.Now().String()
			if _, err := a.User(mustSign(t, &f, claims(p, "buyer"))); flashsale.ErrorCode(err) != flashsale.EUnauthorized {
				t.Errorf("forged kid: User = %v; want unauthorized", err)
			}
		})
	}
	wg.Wait()
	if got := p.Reads.Load() - reads; got > 1 {
		t.Fatalf("200 forged kids read the keys %d times; want at most 1", got)
	}
	if got := a.Stats().Refused["unknown_kid"]; got != 200 {
		t.Fatalf("Refused[unknown_kid] = %d; want 200", got)
	}
}

// TestProviderKeysKeptWhileDown: a provider that stops answering leaves
// the keys read before in use; new tokens signed with them pass.
func TestProviderKeysKeptWhileDown(t *testing.T) {
	k := testKeys()
	p := newTestProvider(t, k["es"])
	a := providerAuth(t, p, testBuyerStore(t), func(c *Provider) { c.Refresh = 20 * time.Millisecond })
	p.Down.Store(true)
	deadline := time.Now().Add(30 * time.Second)
	for a.Stats().KeyRefreshFailures < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no failed refresh of the keys")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i := range 5 {
		if _, err := a.User(mustSign(t, k["es"], claims(p, "buyer-"+string(rune('a'+i))))); err != nil {
			t.Fatalf("provider down: User = %v; want the cached key to verify", err)
		}
	}
	p.Close() // gone altogether
	if _, err := a.User(mustSign(t, k["es"], claims(p, "buyer-z"))); err != nil {
		t.Fatalf("provider gone: User = %v; want the cached key to verify", err)
	}
}

// TestProviderRotationMidSale: buyers click on while the provider
// rotates its key: the new key is published beside the old (tokens of
// both arrive, some naming the new kid before any background refresh),
// then the old one is withdrawn once its tokens are gone. No buyer is
// refused, and each buyer is one id throughout.
func TestProviderRotationMidSale(t *testing.T) {
	k := testKeys()
	oldKey, newKey := k["rs"], k["rs2"]
	p := newTestProvider(t, oldKey)
	a := providerAuth(t, p, testBuyerStore(t), func(c *Provider) { c.Refresh = time.Hour })
	const buyers, clicks = 40, 5
	ids := make([]int64, buyers)
	click := func(key *SigningKey) {
		var wg sync.WaitGroup
		for b := range buyers {
			wg.Go(func() {
				tok := mustSign(t, key, claims(p, "buyer-"+strings.Repeat("x", b)))
				for range clicks {
					id, err := a.UserContext(context.Background(), tok)
					if err != nil {
						t.Errorf("buyer %d, key %s: refused: %v", b, key.KID, err)
						return
					}
					if ids[b] != id && ids[b] != 0 {
						t.Errorf("buyer %d: id %d, then %d", b, ids[b], id)
					}
				}
			})
		}
		wg.Wait()
	}
	fill := func() {
		for b := range buyers {
			id, _ := a.User(mustSign(t, oldKey, claims(p, "buyer-"+strings.Repeat("x", b))))
			ids[b] = id
		}
	}
	fill()
	click(oldKey)
	p.setKeys(oldKey, newKey) // the overlap: both published
	var wg sync.WaitGroup
	wg.Go(func() { click(newKey) }) // new kid, unknown until one refresh
	wg.Go(func() { click(oldKey) })
	wg.Wait()
	p.setKeys(newKey) // the old key withdrawn
	click(newKey)
	if got := a.Stats().Refused; sum(got) != 0 {
		t.Fatalf("refusals during the rotation: %v", got)
	}
}

func sum(m map[string]uint64) (n uint64) {
	for _, v := range m {
		n += v
	}
	return n
}

// TestSubjectsAreBuyers: the same subject from two issuers is two buyers;
// an HS256 subject and a provider's subject that reads the same are two;
// one (issuer, subject) is one buyer for every instance sharing the store.
func TestSubjectsAreBuyers(t *testing.T) {
	k := testKeys()
	db := testBuyerStore(t)
	p1, p2 := newTestProvider(t, k["rs"]), newTestProvider(t, k["rs"])
	a1, a2 := providerAuth(t, p1, db), providerAuth(t, p2, db)
	a1b := providerAuth(t, p1, db) // another instance of issuer 1
	id1, err1 := a1.User(mustSign(t, k["rs"], claims(p1, "5")))
	id2, err2 := a2.User(mustSign(t, k["rs"], claims(p2, "5")))
	id1b, err1b := a1b.User(mustSign(t, k["rs"], claims(p1, "5")))
	hs, _ := a1.UserToken(5, time.Hour)
	idHS, errHS := a1.User(hs)
	if err1 != nil || err2 != nil || err1b != nil || errHS != nil {
		t.Fatal(err1, err2, err1b, errHS)
	}
	if id1 == id2 || id1 != id1b || idHS != 5 || id1 == 5 || id2 == 5 {
		t.Fatalf("issuer 1: %d (another instance: %d), issuer 2: %d, HS256: %d; want issuer 1's twice, all else apart", id1, id1b, id2, idHS)
	}
	if got, err := a1.Buyer(context.Background(), p1.URL, "5"); err != nil || got != id1 {
		t.Fatalf("Buyer(issuer 1, 5) = %d, %v; want %d", got, err, id1)
	}
	// An HS256 subject in the providers' range is refused beside one.
	big := sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "4611686018427387905", "exp": time.Now().Add(time.Hour).Unix()})
	if _, err := a1.User(big); flashsale.ErrorCode(err) != flashsale.EUnauthorized {
		t.Fatalf("HS256 subject above BuyerBase: User = %v; want unauthorized", err)
	}
}

// TestDiscoveryMismatch: a discovery document naming another issuer is
// refused at start.
func TestDiscoveryMismatch(t *testing.T) {
	p := newTestProvider(t, testKeys()["rs"])
	a := newAuth(t)
	err := a.UseProvider(t.Context(), Provider{Issuer: p.URL + "/", Audience: "x"}, testBuyerStore(t))
	if err == nil || !strings.Contains(err.Error(), "names issuer") {
		t.Fatalf("UseProvider = %v; want the issuer mismatch", err)
	}
}
