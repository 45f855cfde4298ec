// Package auth issues and verifies the service's credentials: HS256 JSON Web
// Tokens for users (the user id in "sub", "exp" required) and one static
// bearer token for the administrator.
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

// MinSecretLen is the shortest JWT secret New accepts. HS256 keys shorter
// than the hash output make brute-forcing a leaked token practical.
const MinSecretLen = 32

// Authenticator verifies bearer tokens. It is safe for concurrent use.
type Authenticator struct {
	secret []byte
	admin  []byte
	parser *jwt.Parser
	now    func() time.Time
	cache  tokenCache
}

// New returns an Authenticator for the JWT secret and the admin token. An
// empty admin token disables the admin routes.
func New(secret, adminToken string) (*Authenticator, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("auth: the JWT secret must be at least %d bytes", MinSecretLen)
	}
	a := &Authenticator{secret: []byte(secret), admin: []byte(adminToken), now: time.Now}
	a.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(5*time.Second),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
	)
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

// User verifies a user token and returns the user id it names. Every
// failure is an EUnauthorized error that says what was wrong.
func (a *Authenticator) User(token string) (int64, error) {
	now := a.now()
	if id, ok := a.cache.get(token, now); ok {
		return id, nil
	}
	var claims userClaims
	_, err := a.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return a.secret, nil })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return 0, flashsale.Errorf(flashsale.EUnauthorized, "the token has expired")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return 0, flashsale.Errorf(flashsale.EUnauthorized, "the token has no expiry (exp)")
	case errors.Is(err, errNotNumericDate):
		return 0, flashsale.Errorf(flashsale.EUnauthorized, "the token's exp, nbf and iat must be JSON numbers (seconds since 1970)")
	case err != nil:
		return 0, flashsale.Errorf(flashsale.EUnauthorized, "the token is not valid")
	}
	id, err := flashsale.ParseID(claims.Subject)
	if err != nil {
		return 0, flashsale.Errorf(flashsale.EUnauthorized, "the token's subject is not a user id: %v", err)
	}
	// Remembered until it expires (without the leeway), and only once it
	// is in force.
	if exp, nbf := claims.ExpiresAt.get(), claims.NotBefore.get(); exp != nil && (nbf == nil || !nbf.After(now)) {
		a.cache.put(token, id, exp.Time)
	}
	return id, nil
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

// errNotNumericDate is returned for a time claim that is not a JSON number.
var errNotNumericDate = errors.New("auth: a time claim is not a JSON number")

// numericDate is a jwt.NumericDate that must be written as a JSON number.
type numericDate struct{ jwt.NumericDate }

func (d *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return errNotNumericDate
	}
	return d.NumericDate.UnmarshalJSON(b)
}

// get returns the date, nil when the claim is absent.
func (d *numericDate) get() *jwt.NumericDate {
	if d == nil {
		return nil
	}
	return &d.NumericDate
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

// IsAdmin reports whether token is the admin token, in constant time.
func (a *Authenticator) IsAdmin(token string) bool {
	return len(a.admin) > 0 && subtle.ConstantTimeCompare([]byte(token), a.admin) == 1
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
