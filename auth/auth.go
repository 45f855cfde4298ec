// Package auth issues and verifies the service's credentials: HS256 JSON Web
// Tokens for users (the user id in "sub", "exp" required) and one static
// bearer token for the administrator. A user token is accepted until
// Leeway (5 s) past its exp, and from Leeway before its nbf, for clocks
// that differ.
package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

// MinSecretLen is the shortest JWT secret New accepts. HS256 keys shorter
// than the hash output make brute-forcing a leaked token practical.
const MinSecretLen = 32

// MinAdminTokenLen is the shortest admin token New accepts: a bearer
// token guessed online must be out of reach.
const MinAdminTokenLen = 32

// Authenticator verifies bearer tokens. It is safe for concurrent use.
type Authenticator struct {
	secret  []byte
	admin   []byte
	parser  *jwt.Parser
	keyFunc jwt.Keyfunc
	macs    sync.Pool // of *macState, for the issued-header path of verify
	now     func() time.Time
	cache   tokenCache
	refused refusalCounts
	// verifying dedupes the concurrent checks of one provider token.
	verifying verifications
	// oidc verifies the identity provider's tokens (UseProvider); nil
	// without one.
	oidc *oidc
}

// New returns an Authenticator for the JWT secret and the admin token
// (at least MinAdminTokenLen bytes). An empty admin token disables the
// admin routes.
func New(secret, adminToken string) (*Authenticator, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: the JWT secret must be at least %d bytes", MinSecretLen)
	}
	if adminToken != "" && len(adminToken) < MinAdminTokenLen {
		return nil, fmt.Errorf("auth: the admin token must be at least %d bytes", MinAdminTokenLen)
	}
	a := &Authenticator{secret: []byte(secret), admin: []byte(adminToken), now: time.Now}
	// The parser checks the header, the algorithm and the signature; the
	// claims by userClaims.check, the same for both paths of verify.
	a.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithoutClaimsValidation(),
	)
	a.keyFunc = func(*jwt.Token) (any, error) { return a.secret, nil }
	a.macs.New = func() any { return newMACState(a.secret) }
	return a, nil
}

// UserToken returns a signed token for userID that expires after ttl.
func (a *Authenticator) UserToken(userID int64, ttl time.Duration) (string, error) {
	if userID <= 0 {
		return "", fmt.Errorf("auth: user id must be positive, got %d", userID)
	}
	claims := jwt.RegisteredClaims{
		Subject:   strconv.FormatInt(userID, 10),
		IssuedAt:  jwt.NewNumericDate(a.now()),
		ExpiresAt: jwt.NewNumericDate(a.now().Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(a.secret)
}

// User is UserContext without a context.
func (a *Authenticator) User(token string) (int64, error) {
	return a.UserContext(context.Background(), token)
}

// UserContext verifies a user token and returns the buyer id it names:
// an HS256 token's numeric subject, or the id of a provider's (issuer,
// subject). Every refusal is an EUnauthorized error that says what was
// wrong; EUnavailable when the store of buyer ids could not be reached
// for a new buyer.
func (a *Authenticator) UserContext(ctx context.Context, token string) (int64, error) {
	now := a.now()
	k := keyOf(token)
	if id, ok := a.cache.get(k, now); ok {
		return id, nil
	}
	g, err := a.checkOnce(ctx, k, token, now)
	if err != nil {
		return 0, a.unauthorized(err)
	}
	// Remembered until it expires (without the leeway), and only once it
	// is in force.
	if g.inForce {
		a.cache.put(k, g.user, g.exp)
	}
	return g.user, nil
}

// checkOnce is check, run once for the concurrent requests of one token
// beside a provider (verifications); HS256 tokens of UserToken's header,
// and every token without a provider, are checked by each request.
func (a *Authenticator) checkOnce(ctx context.Context, k tokenKey, token string, now time.Time) (grant, error) {
	if a.oidc == nil || strings.HasPrefix(token, issuedPrefix) {
		return a.check(ctx, token, now)
	}
	return a.verifying.once(ctx, k, func() (grant, error) { return a.check(ctx, token, now) })
}

// sealTagLen is how many bytes of HMAC-SHA256 a sealed value carries:
// 128 bits leave forging one to chance.
const sealTagLen = 16

// Seal returns data as an opaque, tamper-evident string (unpadded
// base64url of data and a tag) for values the service hands out and takes
// back, such as page cursors; Open checks it. purpose keeps uses apart:
// what was sealed for one does not open for another, nor does a token. The
// key is derived from the JWT secret, so instances that share the secret
// open what each other sealed.
func (a *Authenticator) Seal(purpose string, data []byte) string {
	return base64.RawURLEncoding.EncodeToString(append(data[:len(data):len(data)], a.sealTag(purpose, data)...))
}

// Open returns the data Seal sealed for purpose, or false when s is not
// such a string (malformed, altered, or sealed with another secret or
// purpose).
func (a *Authenticator) Open(purpose, s string) ([]byte, bool) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < sealTagLen {
		return nil, false
	}
	data, tag := b[:len(b)-sealTagLen], b[len(b)-sealTagLen:]
	if !hmac.Equal(tag, a.sealTag(purpose, data)) {
		return nil, false
	}
	return data, true
}

// sealTag is HMAC-SHA256 of data under a key derived for purpose.
func (a *Authenticator) sealTag(purpose string, data []byte) []byte {
	kdf := hmac.New(sha256.New, a.secret)
	kdf.Write([]byte("flashsale seal: " + purpose))
	mac := hmac.New(sha256.New, kdf.Sum(nil))
	mac.Write(data)
	return mac.Sum(nil)[:sealTagLen]
}

// IsAdmin reports whether token is the admin token, in constant time,
// its length included: the SHA-256 digests are compared, which take as
// long whatever the token's length (ConstantTimeCompare returns at once
// when the lengths differ).
func (a *Authenticator) IsAdmin(token string) bool {
	if len(a.admin) == 0 {
		return false
	}
	got, want := sha256.Sum256([]byte(token)), sha256.Sum256(a.admin)
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// BearerToken extracts the token from an Authorization header value, or
// returns an EUnauthorized error.
func BearerToken(header string) (string, error) {
	scheme, token, ok := strings.Cut(header, " ")
	if header == "" {
		return "", flashsale.Errorf(flashsale.EUnauthorized, "missing Authorization header")
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", flashsale.Errorf(flashsale.EUnauthorized, "the Authorization header must be \"Bearer <token>\"")
	}
	return strings.TrimSpace(token), nil
}
