package auth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
)

// Provider is an identity provider whose tokens buyers sign in with
// (OIDC): its keys are read from a JWKS URL, given or found by discovery.
type Provider struct {
	// Issuer is the provider's iss, exactly. With no JWKSURL, discovery
	// reads Issuer + "/.well-known/openid-configuration" for it.
	Issuer  string
	JWKSURL string
	// Audience must be in the token's aud (required).
	Audience string
	// UserClaim names the claim that identifies the buyer ("sub" if "").
	UserClaim string
	// Refresh is how often the keys are read again in the background
	// (DefaultKeyRefresh if 0); UnknownKIDEvery how often at most a token
	// naming an unknown kid makes them read at once (DefaultUnknownKIDEvery
	// if 0).
	Refresh, UnknownKIDEvery time.Duration
	// Client fetches discovery and keys (a 10 s timeout if nil).
	Client *http.Client
	Log    *slog.Logger
}

// Defaults of a Provider.
const (
	DefaultKeyRefresh      = 5 * time.Minute
	DefaultUnknownKIDEvery = 10 * time.Second
)

// signingAlgs are the algorithms a provider's token may use. HMAC is not
// one of them: a provider's keys are public.
var signingAlgs = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// oidc is the verifier of one provider's tokens.
type oidc struct {
	p    Provider
	keys *jwkset.MemoryJWKSet // as last read
	// unknownKID limits the reads of the keys unknown kids cause.
	unknownKID *rate.Limiter
	parser     *jwt.Parser
	lookups    singleflight.Group // unknown kids: one refresh serves every waiter
	buyers     *buyers
	// unknown counts the lookups of kids not among the keys;
	// refreshFailures the failed reads of the keys; checked the tokens
	// of its issuer checked (a key looked up, the signature checked).
	unknown, refreshFailures, checked atomic.Uint64
}

// UseProvider makes a accept p's tokens beside its HS256 ones, a token's
// iss telling which applies, with the buyers' ids kept in store. It reads
// the discovery document (an error if it cannot) and the keys (logged if
// it cannot: they are read again in the background until ctx ends).
func (a *Authenticator) UseProvider(ctx context.Context, p Provider, store BuyerStore) error {
	if p.Issuer == "" || p.Audience == "" {
		return errors.New("auth: a provider needs its issuer and an audience")
	}
	if store == nil {
		return errors.New("auth: a provider needs a store of buyer ids")
	}
	if p.UserClaim == "" {
		p.UserClaim = "sub"
	}
	p.Refresh = cmpOr(p.Refresh, DefaultKeyRefresh)
	p.UnknownKIDEvery = cmpOr(p.UnknownKIDEvery, DefaultUnknownKIDEvery)
	if p.Client == nil {
		p.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if p.Log == nil {
		p.Log = slog.New(slog.DiscardHandler)
	}
	if p.JWKSURL == "" {
		u, err := discover(ctx, p.Client, p.Issuer)
		if err != nil {
			return err
		}
		p.JWKSURL = u
	}
	o := &oidc{p: p, buyers: newBuyers(store)}
	if err := o.newKeys(ctx); err != nil {
		return err
	}
	// No WithValidMethods: an HMAC token or alg none must reach the
	// keyfunc to be routed (routeOf); keyFor refuses any alg not in
	// signingAlgs.
	o.parser = jwt.NewParser(
		jwt.WithIssuer(p.Issuer),
		jwt.WithAudience(p.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
		jwt.WithJSONNumber(),
	)
	a.oidc = o
	return nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// newKeys is the provider's key set, o.keys: read now (a failure logged,
// the set empty until a read succeeds) and every p.Refresh in the
// background until ctx ends. A failed read keeps the keys it had.
func (o *oidc) newKeys(ctx context.Context) error {
	o.keys = jwkset.NewMemoryStorage()
	o.unknownKID = rate.NewLimiter(rate.Every(o.p.UnknownKIDEvery), 1)
	_, err := jwkset.NewStorageFromHTTP(o.p.JWKSURL, o.readOptions(ctx, o.p.Refresh))
	if err != nil {
		return fmt.Errorf("auth: the provider's keys at %s: %w", o.p.JWKSURL, err)
	}
	return nil
}

// readOptions are jwkset's for reading the key set into o.keys, again
// every refresh if not 0.
func (o *oidc) readOptions(ctx context.Context, refresh time.Duration) jwkset.HTTPClientStorageOptions {
	return jwkset.HTTPClientStorageOptions{
		Client:                    o.p.Client,
		Ctx:                       ctx,
		HTTPTimeout:               o.p.Client.Timeout,
		NoErrorReturnFirstHTTPReq: true,
		RefreshErrorHandler: func(ctx context.Context, err error) {
			o.refreshFailures.Add(1)
			o.p.Log.Warn("auth: reading the identity provider's keys failed; the keys read before stay in use",
				"jwks_url", o.p.JWKSURL, "err", err)
		},
		RefreshInterval: refresh,
		Storage:         o.keys,
	}
}

// discover reads the JWKS URL from the provider's discovery document,
// whose issuer must be the one configured (OpenID Connect Discovery 4.3).
func discover(ctx context.Context, c *http.Client, issuer string) (string, error) {
	u := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("auth: discovery: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("auth: discovery at %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("auth: discovery at %s answered %s", u, resp.Status)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&doc); err != nil {
		return "", fmt.Errorf("auth: discovery at %s: %w", u, err)
	}
	if doc.Issuer != issuer || doc.JWKSURI == "" {
		return "", fmt.Errorf("auth: discovery at %s names issuer %q and jwks_uri %q; want issuer %q and a jwks_uri", u, doc.Issuer, doc.JWKSURI, issuer)
	}
	return doc.JWKSURI, nil
}

// keyFor returns the public key the token's kid names, checked against
// the token's alg: the key's own alg when it has one, else its type. The
// token's alg alone never picks a key, and an alg not in signingAlgs gets none.
func (o *oidc) keyFor(ctx context.Context, t *jwt.Token) (any, error) {
	if !slices.Contains(signingAlgs, t.Method.Alg()) {
		return nil, fmt.Errorf("%w: signing method %s", errInvalid, t.Method.Alg())
	}
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return nil, errNoKID
	}
	jwk, err := o.lookup(ctx, kid)
	if err != nil {
		return nil, err
	}
	m := jwk.Marshal()
	alg := t.Method.Alg()
	if m.ALG != "" && m.ALG.String() != alg || !ktyFits(m.KTY, alg) || m.USE != "" && m.USE != jwkset.UseSig {
		return nil, fmt.Errorf("%w: the key %q is %s %s, the token %s", errKeyMismatch, kid, m.KTY, m.ALG, alg)
	}
	if pk, ok := jwk.Key().(interface{ Public() crypto.PublicKey }); ok {
		return pk.Public(), nil
	}
	return jwk.Key(), nil
}

// lookup reads the key kid names. An unknown kid reads the keys again
// first, if the limiter allows one now (never waiting for it), so a flood
// of forged kids costs the provider one read per UnknownKIDEvery; every
// concurrent lookup of that kid waits for the same read.
func (o *oidc) lookup(ctx context.Context, kid string) (jwkset.JWK, error) {
	if jwk, err := o.keys.KeyRead(ctx, kid); err == nil {
		return jwk, nil
	}
	o.unknown.Add(1)
	// The read outlives the caller that started it: others wait on it.
	v, err, _ := o.lookups.Do(kid, func() (any, error) {
		if !o.unknownKID.Allow() {
			return nil, errUnknownKID
		}
		// One read, no refresh loop: the set lands in o.keys.
		if _, err := jwkset.NewStorageFromHTTP(o.p.JWKSURL, o.readOptions(context.WithoutCancel(ctx), 0)); err != nil {
			return nil, err
		}
		return o.keys.KeyRead(ctx, kid)
	})
	if err != nil {
		return jwkset.JWK{}, fmt.Errorf("%w: %q", errUnknownKID, kid)
	}
	return v.(jwkset.JWK), nil
}

// ktyFits reports whether a key of type kty can check alg.
func ktyFits(kty jwkset.KTY, alg string) bool {
	switch alg[:2] {
	case "RS", "PS":
		return kty == jwkset.KtyRSA
	case "ES":
		return kty == jwkset.KtyEC
	default: // EdDSA
		return kty == jwkset.KtyOKP
	}
}

// route is where a token goes, by its alg and iss as golang-jwt read
// them, before any check.
type route int

const (
	routeUnread   route = iota // golang-jwt could not read it, or its iss is not a string
	routeNone                  // alg none
	routeHMAC                  // an HMAC naming the provider's issuer: the RS/HS confusion
	routeProvider              // the provider's: verified by oidc.verify
	routeHS256                 // an HMAC of another issuer: ours
	routeIssuer                // neither an HMAC nor the provider's
)

// errRouted stops golang-jwt's parse of a token that the provider does
// not verify: checkRouted takes it where its route says.
var errRouted = errors.New("auth: not the identity provider's token")

// routeOf is t's route, and its iss.
func (o *oidc) routeOf(t *jwt.Token) (route, string) {
	c, _ := t.Claims.(jwt.MapClaims)
	iss, isText := c["iss"].(string)
	alg := t.Method.Alg()
	switch {
	case c["iss"] != nil && !isText:
		return routeUnread, ""
	case alg == "none":
		return routeNone, iss
	case iss == o.p.Issuer && strings.HasPrefix(alg, "HS"):
		return routeHMAC, iss
	case iss == o.p.Issuer:
		return routeProvider, iss
	case strings.HasPrefix(alg, "HS"):
		return routeHS256, iss
	default:
		return routeIssuer, iss
	}
}

// verify reads a token with golang-jwt, once, and routes it by its alg
// and iss (routeOf). A token of the provider's issuer is then checked on
// that same parse: signature by the key its kid names, exp and nbf with
// the Leeway, iss and aud; and its subject is mapped to the buyer's id.
// Any other route is returned with no grant, for checkRouted to follow.
func (o *oidc) verify(ctx context.Context, token string, now time.Time) (grant, route, string, error) {
	claims := jwt.MapClaims{}
	r, iss := routeUnread, ""
	_, err := o.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		if r, iss = o.routeOf(t); r != routeProvider {
			return nil, errRouted
		}
		key, err := o.keyFor(ctx, t)
		if err == nil {
			o.checked.Add(1)
		}
		return key, err
	})
	if r != routeProvider {
		return grant{}, r, iss, nil
	}
	exp, _ := claims.GetExpirationTime()
	if err != nil {
		return grant{}, r, iss, jwtReason(err, exp == nil)
	}
	sub, err := claimText(claims[o.p.UserClaim])
	if err == nil {
		err = checkSubject(sub)
	}
	if err != nil {
		return grant{}, r, iss, fmt.Errorf("%w: its %s claim: %w", errSubject, o.p.UserClaim, err)
	}
	id, err := o.buyers.id(ctx, o.p.Issuer, sub)
	if err != nil {
		return grant{}, r, iss, err
	}
	nbf, _ := claims.GetNotBefore()
	return grant{user: id, exp: exp.Time, inForce: nbf == nil || !nbf.After(now)}, r, iss, nil
}

// jwtReason is the reason for golang-jwt's error.
func jwtReason(err error, noExp bool) error {
	for _, r := range []error{errNoKID, errUnknownKID, errKeyMismatch} {
		if errors.Is(err, r) {
			return err
		}
	}
	switch {
	case errors.Is(err, jwt.ErrInvalidKeyType):
		return errKeyMismatch
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && noExp:
		return errNoExpiry
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing), errors.Is(err, jwt.ErrTokenInvalidAudience):
		return errAudience
	case errors.Is(err, jwt.ErrTokenExpired):
		return errExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return errNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return errIssuer
	default:
		return errInvalid
	}
}

// claimText is a claim that names a buyer: a string, or a number as
// written.
func claimText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case nil:
		return "", errors.New("missing")
	default:
		return "", fmt.Errorf("a %T, not a string", v)
	}
}
