package auth

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

// benchTokens is how many distinct tokens a benchmark cycles through: the
// "new" cases verify each as if never seen.
const benchTokens = 1024

func benchAuth(b *testing.B) (*Authenticator, []string) {
	b.Helper()
	a, err := New(testSecret, "")
	if err != nil {
		b.Fatal(err)
	}
	tokens := make([]string, benchTokens)
	for i := range tokens {
		// Realistic subjects: snowflake-sized user ids.
		if tokens[i], err = a.UserToken(int64(1)<<60+int64(i), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	return a, tokens
}

// BenchmarkUser measures a user token's verification. The "new/…" cases
// verify a token as if never seen (the cache is bypassed: verify alone,
// as each path does it); "User/new" is the whole of User with the cache
// defeated (every token a new one, the cache emptied between rounds), and
// "User/cached" is a buyer's repeated click.
func BenchmarkUser(b *testing.B) {
	a, tokens := benchAuth(b)
	legacy := newLegacyVerifier(a)
	// The same tokens with their claims in another order (keys sorted), so
	// the in-house path reads them with encoding/json.
	reordered := make(map[string]string, len(tokens))
	for _, t := range tokens {
		g, err := a.verify(t, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		reordered[t] = sign(b, jwt.SigningMethodHS256, a.secret, jwt.MapClaims{
			"sub": strconv.FormatInt(g.user, 10), "exp": g.exp.Unix(), "iat": time.Now().Unix(),
		})
	}
	paths := []struct {
		name   string
		verify func(string, time.Time) (int64, error)
	}{
		{"new/golang-jwt", legacy.user},
		{"new/golang-jwt-lean", func(t string, now time.Time) (int64, error) {
			return user(a.verifyLibrary(t, now))
		}},
		{"new/inhouse", func(t string, now time.Time) (int64, error) {
			return user(a.verify(t, now))
		}},
		{"new/inhouse-json", func(t string, now time.Time) (int64, error) {
			return user(a.verify(reordered[t], now))
		}},
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			now := time.Now()
			for i := 0; b.Loop(); i++ {
				if _, err := p.verify(tokens[i%benchTokens], now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("User/new", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%benchTokens == 0 {
				a.cache = tokenCache{}
			}
			if _, err := a.User(tokens[i%benchTokens]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("User/cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := a.User(tokens[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func user(g grant, err error) (int64, error) { return g.user, err }

// legacyVerifier is User's verification before the in-house path (main at
// 6940308, without the cache): golang-jwt validating the claims, and times
// read through jwt.NumericDate's own UnmarshalJSON. Kept as the baseline.
type legacyVerifier struct {
	a      *Authenticator
	parser *jwt.Parser
}

func newLegacyVerifier(a *Authenticator) *legacyVerifier {
	return &legacyVerifier{a: a, parser: jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(5*time.Second),
		jwt.WithTimeFunc(func() time.Time { return a.now() }),
	)}
}

func (l *legacyVerifier) user(token string, _ time.Time) (int64, error) {
	var claims legacyClaims
	_, err := l.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return l.a.secret, nil })
	if err != nil {
		return 0, err
	}
	return flashsale.ParseID(claims.Subject)
}

type legacyClaims struct {
	Subject   string             `json:"sub"`
	ExpiresAt *legacyNumericDate `json:"exp"`
	NotBefore *legacyNumericDate `json:"nbf"`
	IssuedAt  *legacyNumericDate `json:"iat"`
}

func (c *legacyClaims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt.get(), nil }
func (c *legacyClaims) GetNotBefore() (*jwt.NumericDate, error)      { return c.NotBefore.get(), nil }
func (c *legacyClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return c.IssuedAt.get(), nil }
func (c *legacyClaims) GetIssuer() (string, error)                   { return "", nil }
func (c *legacyClaims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *legacyClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }

type legacyNumericDate struct{ jwt.NumericDate }

func (d *legacyNumericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return errors.New("not a number")
	}
	return d.NumericDate.UnmarshalJSON(b)
}

func (d *legacyNumericDate) get() *jwt.NumericDate {
	if d == nil {
		return nil
	}
	return &d.NumericDate
}
