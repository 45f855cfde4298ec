package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

// Leeway is how long past its exp, or before its nbf, a user token is
// still accepted: the issuer's clock and the instances' differ.
const Leeway = 5 * time.Second

// maxFastToken bounds the tokens verify checks itself (UserToken's are
// under 200 bytes); longer ones go to golang-jwt, so pooled buffers stay
// small.
const maxFastToken = 1024

// issuedHeader is the header segment of every token UserToken signs: the
// base64url of {"alg":"HS256","typ":"JWT"} (golang-jwt writes the header
// map with its keys sorted).
var issuedHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// issuedPrefix is how every token UserToken signs starts.
var issuedPrefix = issuedHeader + "."

// grant is what a valid user token says.
type grant struct {
	user    int64
	exp     time.Time // without the leeway
	inForce bool      // no nbf, or one passed (without the leeway)
}

// check verifies a token by the verifier its iss and alg name: HS256
// (verify) unless a provider is in use and the token names its issuer.
// A provider's tokens are never HMACs, and an HS256 subject is below
// BuyerBase beside a provider.
func (a *Authenticator) check(ctx context.Context, token string, now time.Time) (grant, error) {
	header, _, _ := strings.Cut(token, ".")
	if header == issuedHeader && len(token) <= maxFastToken {
		g, err := a.verify(token, now)
		if err != nil && a.oidc != nil {
			if _, iss, ok := peek(token); ok && iss == a.oidc.p.Issuer {
				return grant{}, errAlgHMAC
			}
		}
		return a.inRange(g, err)
	}
	if a.oidc != nil {
		return a.checkRouted(ctx, token, now)
	}
	if alg, _, ok := peek(token); ok && strings.EqualFold(alg, "none") {
		return grant{}, errAlgNone
	}
	return a.verify(token, now)
}

// checkRouted is check of a token beside a provider: golang-jwt reads it
// once, and the provider verifies that same parse when the token names
// its issuer (oidc.verify); the routes to HS256 parse again (only tokens
// whose header is not UserToken's, or unreadable ones, take them).
func (a *Authenticator) checkRouted(ctx context.Context, token string, now time.Time) (grant, error) {
	g, r, iss, err := a.oidc.verify(ctx, token, now)
	switch r {
	case routeUnread:
		// golang-jwt knows "none" only in that case: "None" is as
		// unsigned, and refused as such, as without a provider.
		if alg, _, ok := peek(token); ok && strings.EqualFold(alg, "none") {
			return grant{}, errAlgNone
		}
		return a.verify(token, now)
	case routeNone:
		return grant{}, errAlgNone
	case routeHMAC:
		return grant{}, errAlgHMAC
	case routeHS256:
		return a.inRange(a.verify(token, now))
	case routeIssuer:
		return grant{}, fmt.Errorf("%w: %q", errIssuer, iss)
	}
	return g, err
}

// inRange refuses an HS256 subject at or above BuyerBase beside a
// provider: those ids are the provider's buyers'.
func (a *Authenticator) inRange(g grant, err error) (grant, error) {
	if err == nil && a.oidc != nil && g.user >= BuyerBase {
		return grant{}, fmt.Errorf("%w: %d is not below %d, where the identity provider's buyers start", errSubject, g.user, BuyerBase)
	}
	return g, err
}

// peek reads a token's alg and iss without verifying anything; false for
// a token golang-jwt cannot read. An alg golang-jwt does not know (such
// as "None") is read all the same.
func peek(token string) (alg, iss string, ok bool) {
	var c issuerClaim
	t, _, err := peekParser.ParseUnverified(token, &c)
	if t == nil || err != nil && !errors.Is(err, jwt.ErrTokenUnverifiable) {
		return "", "", false
	}
	alg, _ = t.Header["alg"].(string)
	return alg, c.Issuer, true
}

var peekParser = jwt.NewParser()

// issuerClaim reads a token's iss alone, whatever its other claims.
type issuerClaim struct {
	Issuer string `json:"iss"`
	jwt.RegisteredClaims
}

func (c *issuerClaim) UnmarshalJSON(b []byte) error {
	var v struct {
		Issuer string `json:"iss"`
	}
	err := json.Unmarshal(b, &v)
	c.Issuer = v.Issuer
	return err
}

// verify checks token's signature, times at now and subject: a token with
// the header UserToken writes here, any other through golang-jwt (HS256
// only). Both paths accept the same tokens with the same claims and
// messages (TestUserVerifies, FuzzVerifyPathsAgree).
func (a *Authenticator) verify(token string, now time.Time) (grant, error) {
	// Our own header (byte for byte) is never parsed, and its alg cannot
	// be swapped: the HMAC-SHA256 is compared before any claim is read.
	// golang-jwt takes HS256 however the header is spelled (another
	// issuer's "kid", key order); where a token is forged it may first
	// name a fault of its claims, where this path only says "not valid".
	header, rest, _ := strings.Cut(token, ".")
	if header != issuedHeader || len(token) > maxFastToken {
		return a.verifyLibrary(token, now)
	}
	payload, sig, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(sig, ".") {
		return grant{}, errInvalid
	}
	m := a.macs.Get().(*macState)
	defer a.macs.Put(m)
	if !m.valid(token[:len(header)+1+len(payload)], sig) {
		return grant{}, errInvalid
	}
	b, err := m.decode(payload)
	if err != nil {
		return grant{}, errInvalid
	}
	if user, exp, ok := parseIssued(b); ok {
		if expired(time.Unix(exp, 0), now) {
			return grant{}, errExpired
		}
		return grant{user: user, exp: time.Unix(exp, 0), inForce: true}, nil
	}
	var c userClaims
	if err := json.Unmarshal(b, &c); err != nil {
		return grant{}, fmt.Errorf("auth: the token's claims: %w", err)
	}
	return c.check(now)
}

// verifyLibrary is verify through golang-jwt, for any header.
func (a *Authenticator) verifyLibrary(token string, now time.Time) (grant, error) {
	var c userClaims
	if _, err := a.parser.ParseWithClaims(token, &c, a.keyFunc); err != nil {
		return grant{}, err
	}
	return c.check(now)
}

// check applies golang-jwt's rules for exp and nbf with the leeway (exp
// required, nbf when present, iat not checked), then reads the subject.
func (c *userClaims) check(now time.Time) (grant, error) {
	exp, nbf := c.ExpiresAt.get(), c.NotBefore.get()
	switch {
	case exp == nil:
		return grant{}, errNoExpiry
	case expired(exp.Time, now):
		return grant{}, errExpired
	case nbf != nil && now.Before(nbf.Add(-Leeway)):
		return grant{}, errNotYetValid
	}
	user, err := flashsale.ParseID(c.Subject)
	if err != nil {
		return grant{}, fmt.Errorf("%w: %w", errSubject, err)
	}
	return grant{user: user, exp: exp.Time, inForce: nbf == nil || !nbf.After(now)}, nil
}

// expired reports whether a token that expires at exp is refused at now.
func expired(exp, now time.Time) bool { return !now.Before(exp.Add(Leeway)) }

// parseIssued reads claims written exactly as UserToken writes them,
// {"sub":"<id>","exp":<n>,"iat":<n>}, and reports false for anything else
// (spaces, escapes, other order or claims, a number of more than 15
// digits, a leading zero), which encoding/json then reads. Up to 15
// digits, encoding/json's float64 holds the number exactly, so both read
// the same (FuzzParseIssued).
func parseIssued(b []byte) (sub, exp int64, ok bool) {
	b, sub, ok1 := cutNumber(b, `{"sub":"`, 19)
	b, exp, ok2 := cutNumber(b, `","exp":`, 15)
	b, _, ok3 := cutNumber(b, `,"iat":`, 15)
	return sub, exp, ok1 && ok2 && ok3 && string(b) == "}"
}

// cutNumber cuts prefix then a positive decimal int64 of at most max
// digits, without a leading zero, from the start of b.
func cutNumber(b []byte, prefix string, max int) (rest []byte, n int64, ok bool) {
	if len(b) <= len(prefix) || string(b[:len(prefix)]) != prefix || b[len(prefix)] == '0' {
		return b, 0, false
	}
	b = b[len(prefix):]
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := int64(b[i] - '0')
		if i == max || n > (math.MaxInt64-d)/10 {
			return b, 0, false
		}
		n = n*10 + d
	}
	return b[i:], n, i > 0
}

// macState is an HMAC-SHA256 under the secret and scratch space, reused
// through Authenticator.macs: a fresh hmac.New costs two allocations of
// SHA-256 state and two more compressions (the key pads) per token.
type macState struct {
	mac hash.Hash
	in  []byte // a segment copied to bytes
	out []byte // a segment decoded
	sum [sha256.Size]byte
}

func newMACState(secret []byte) *macState {
	return &macState{mac: hmac.New(sha256.New, secret)}
}

// valid reports whether sig, base64url as golang-jwt reads it, is the
// HMAC of signed; hmac.Equal compares in constant time.
func (m *macState) valid(signed, sig string) bool {
	got, err := m.decode(sig)
	if err != nil {
		return false
	}
	m.in = append(m.in[:0], signed...)
	m.mac.Reset()
	m.mac.Write(m.in)
	return hmac.Equal(got, m.mac.Sum(m.sum[:0]))
}

// decode decodes an unpadded base64url segment as golang-jwt does (not
// strict: unused low bits of the last character and CR, LF are ignored)
// into m.out, valid until the next call.
func (m *macState) decode(seg string) ([]byte, error) {
	m.in = append(m.in[:0], seg...)
	enc := base64.RawURLEncoding
	if n := enc.DecodedLen(len(m.in)); cap(m.out) < n {
		m.out = make([]byte, n)
	}
	n, err := enc.Decode(m.out[:cap(m.out)], m.in)
	return m.out[:n], err
}

// userClaims are the claims of a user token. Unlike jwt.RegisteredClaims,
// its times must be JSON numbers, as RFC 7519 defines a NumericDate: the
// library also takes a string holding a number.
type userClaims struct {
	Subject   string       `json:"sub"`
	ExpiresAt *numericDate `json:"exp"`
	NotBefore *numericDate `json:"nbf"`
	IssuedAt  *numericDate `json:"iat"`
}

var _ jwt.Claims = (*userClaims)(nil)

func (c *userClaims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt.get(), nil }
func (c *userClaims) GetNotBefore() (*jwt.NumericDate, error)      { return c.NotBefore.get(), nil }
func (c *userClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt.get(), nil }
func (c *userClaims) GetIssuer() (string, error)                   { return "", nil }
func (c *userClaims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *userClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }

// numericDate is a jwt.NumericDate that must be written as a JSON number.
type numericDate struct{ jwt.NumericDate }

// UnmarshalJSON reads the number as jwt.NumericDate does (seconds as a
// float64, truncated to jwt.TimePrecision) without its second pass of
// encoding/json: b is a JSON value encoding/json has already checked.
func (d *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return errNotNumericDate
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("auth: time claim %s: %w", b, err)
	}
	round, frac := math.Modf(f)
	d.NumericDate = jwt.NumericDate{Time: time.Unix(int64(round), int64(frac*1e9)).Truncate(jwt.TimePrecision)}
	return nil
}

// get returns the date, nil when the claim is absent.
func (d *numericDate) get() *jwt.NumericDate {
	if d == nil {
		return nil
	}
	return &d.NumericDate
}
