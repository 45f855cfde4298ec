package auth

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

const testSecret = "0123456789abcdef0123456789abcdef"

func newAuth(t testing.TB) *Authenticator {
	t.Helper()
	a, err := New(testSecret, testAdmin)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sign(t testing.TB, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestUserTokenRoundTrip(t *testing.T) {
	a := newAuth(t)
	tok, err := a.UserToken(42, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.User(tok)
	if err != nil || id != 42 {
		t.Fatalf("User() = %d, %v; want 42, nil", id, err)
	}
}

func TestUserRejects(t *testing.T) {
	a := newAuth(t)
	future := time.Now().Add(time.Hour).Unix()
	tests := []struct {
		name    string
		token   string
		message string
	}{
		{"expired", sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "1", "exp": time.Now().Add(-time.Hour).Unix()}), "expired"},
		{"no exp", sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "1"}), "no expiry"},
		{"other secret", sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), jwt.MapClaims{"sub": "1", "exp": future}), "not valid"},
		{"HS512", sign(t, jwt.SigningMethodHS512, []byte(testSecret), jwt.MapClaims{"sub": "1", "exp": future}), "not valid"},
		{"alg none", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, jwt.MapClaims{"sub": "1", "exp": future}), "not signed (alg none)"},
		{"sub not a number", sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "bob", "exp": future}), "subject"},
		{"sub zero", sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "0", "exp": future}), "subject"},
		{"sub negative", sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"sub": "-5", "exp": future}), "subject"},
		{"no sub", sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.MapClaims{"exp": future}), "subject"},
		{"garbage", "not.a.jwt", "not valid"},
		{"admin token", testAdmin, "not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.User(tt.token)
			if flashsale.ErrorCode(err) != flashsale.EUnauthorized || !strings.Contains(flashsale.ErrorMessage(err), tt.message) {
				t.Fatalf("User() error = %v; want unauthorized mentioning %q", err, tt.message)
			}
		})
	}
}

func TestIsAdmin(t *testing.T) {
	a := newAuth(t)
	userTok, err := a.UserToken(1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token string
		want  bool
	}{
		{testAdmin, true},
		{testAdmin + " ", false},
		{testAdmin[:31], false},
		{testAdmin + testAdmin, false},
		{"", false},
		{userTok, false},
	}
	for _, tt := range tests {
		if got := a.IsAdmin(tt.token); got != tt.want {
			t.Errorf("IsAdmin(%q) = %v, want %v", tt.token, got, tt.want)
		}
	}
	noAdmin, err := New(testSecret, "")
	if err != nil {
		t.Fatal(err)
	}
	if noAdmin.IsAdmin("") {
		t.Error("an empty admin token must not make the empty string an admin")
	}
}

func TestNewRejectsShortSecret(t *testing.T) {
	if _, err := New("short", testAdmin); err == nil {
		t.Fatal("New accepted a 5-byte secret")
	}
}

// TestNewRejectsShortAdminToken: an admin token must be at least
// MinAdminTokenLen bytes, out of reach of online guessing.
func TestNewRejectsShortAdminToken(t *testing.T) {
	if _, err := New(testSecret, "change-me"); err == nil || !strings.Contains(err.Error(), "at least 32 bytes") {
		t.Fatalf("New with a 9-byte admin token: %v, want refused", err)
	}
}

// the admin token of these tests.
const testAdmin = "admin-token-admin-token-admin-token"

func TestUserTokenRejectsBadID(t *testing.T) {
	a := newAuth(t)
	if _, err := a.UserToken(0, time.Hour); err == nil {
		t.Fatal("UserToken(0) succeeded")
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		header, want, wantCode string
	}{
		{"Bearer abc", "abc", ""},
		{"bearer abc", "abc", ""},
		{"Bearer  abc ", "abc", ""},
		{"", "", flashsale.EUnauthorized},
		{"Basic abc", "", flashsale.EUnauthorized},
		{"Bearer", "", flashsale.EUnauthorized},
		{"Bearer   ", "", flashsale.EUnauthorized},
	}
	for _, tt := range tests {
		got, err := BearerToken(tt.header)
		if got != tt.want || flashsale.ErrorCode(err) != tt.wantCode {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, code %q", tt.header, got, err, tt.want, tt.wantCode)
		}
	}
}

// TestUserRejectsNonCanonical refuses subjects that only parse as a user
// id when read loosely, and time claims written as strings.
func TestUserRejectsNonCanonical(t *testing.T) {
	a := newAuth(t)
	key := []byte(testSecret)
	future := time.Now().Add(time.Hour).Unix()
	tests := []struct {
		name    string
		claims  jwt.MapClaims
		message string // "" for accepted
	}{
		{"canonical", jwt.MapClaims{"sub": "7", "exp": future}, ""},
		{"fractional exp", jwt.MapClaims{"sub": "7", "exp": float64(future) + 0.5}, ""},
		{"sub +7", jwt.MapClaims{"sub": "+7", "exp": future}, "subject"},
		{"sub 007", jwt.MapClaims{"sub": "007", "exp": future}, "subject"},
		{"sub -1", jwt.MapClaims{"sub": "-1", "exp": future}, "subject"},
		{"sub 0", jwt.MapClaims{"sub": "0", "exp": future}, "subject"},
		{"sub past int64", jwt.MapClaims{"sub": "9223372036854775808", "exp": future}, "subject"},
		{"sub as a number", jwt.MapClaims{"sub": 7, "exp": future}, "not valid"},
		{"exp as a string", jwt.MapClaims{"sub": "7", "exp": strconv.FormatInt(future, 10)}, "exp, nbf and iat must be JSON numbers"},
		{"nbf as a string", jwt.MapClaims{"sub": "7", "exp": future, "nbf": "0"}, "must be JSON numbers"},
		{"exp as a bool", jwt.MapClaims{"sub": "7", "exp": true}, "must be JSON numbers"},
		{"exp null", jwt.MapClaims{"sub": "7", "exp": nil}, "no expiry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.User(sign(t, jwt.SigningMethodHS256, key, tt.claims))
			if tt.message == "" {
				if err != nil || id != 7 {
					t.Fatalf("User() = %d, %v; want 7", id, err)
				}
				return
			}
			if flashsale.ErrorCode(err) != flashsale.EUnauthorized || !strings.Contains(flashsale.ErrorMessage(err), tt.message) {
				t.Fatalf("User() = %d, %v; want unauthorized mentioning %q", id, err, tt.message)
			}
		})
	}
}

func TestSealOpen(t *testing.T) {
	a := newAuth(t)
	other, err := New("another-secret-another-secret-xx", "")
	if err != nil {
		t.Fatal(err)
	}
	sealed := a.Seal("cursor", []byte("page 2"))
	if got, ok := a.Open("cursor", sealed); !ok || string(got) != "page 2" {
		t.Fatalf("Open(Seal(x)) = %q, %v", got, ok)
	}
	if got, ok := other.Open("cursor", sealed); ok {
		t.Errorf("another secret opened %q", got)
	}
	if got, ok := a.Open("other purpose", sealed); ok {
		t.Errorf("another purpose opened %q", got)
	}
	flipped := []byte(sealed)
	flipped[2] ^= 1
	for _, s := range []string{"", "x", sealed[:len(sealed)-1], sealed + "A", sealed + "=", string(flipped), strings.ToUpper(sealed)} {
		if got, ok := a.Open("cursor", s); ok {
			t.Errorf("Open(%q) = %q, true; want refused", s, got)
		}
	}
}

// TestUserCachedToken: a token verified once is answered again from the
// cache, but only that very token and only until it expires.
func TestUserCachedToken(t *testing.T) {
	a := newAuth(t)
	now := time.Now()
	a.now = func() time.Time { return now }
	token, err := a.UserToken(7, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if id, err := a.User(token); err != nil || id != 7 {
			t.Fatalf("User = %d, %v; want 7", id, err)
		}
	}
	if _, ok := a.cache.get(keyOf(token), now); !ok {
		t.Fatal("a verified token is not cached")
	}
	// The same claims under a signature altered in one character (not the
	// last, whose low bits base64 may ignore).
	i := len(token) - 10
	forged := token[:i] + map[bool]string{true: "B", false: "A"}[token[i] == 'A'] + token[i+1:]
	if _, err := a.User(forged); flashsale.ErrorCode(err) != flashsale.EUnauthorized {
		t.Fatalf("User(forged) error = %v; want unauthorized", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := a.User(token); flashsale.ErrorCode(err) != flashsale.EUnauthorized || !strings.Contains(flashsale.ErrorMessage(err), "expired") {
		t.Fatalf("User(expired, cached before) error = %v; want unauthorized: expired", err)
	}
}

// TestUserNotYetValidIsNotCached: a token accepted within the leeway of
// its nbf is not remembered, and one whose nbf is ahead is refused.
func TestUserNotYetValidIsNotCached(t *testing.T) {
	a := newAuth(t)
	key := []byte(testSecret)
	exp := time.Now().Add(time.Hour).Unix()
	soon := sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "3", "exp": exp, "nbf": time.Now().Add(2 * time.Second).Unix()})
	if id, err := a.User(soon); err != nil || id != 3 {
		t.Fatalf("User(nbf within leeway) = %d, %v; want 3", id, err)
	}
	if _, ok := a.cache.get(keyOf(soon), time.Now()); ok {
		t.Fatal("a token not yet in force was cached")
	}
	later := sign(t, jwt.SigningMethodHS256, key, jwt.MapClaims{"sub": "3", "exp": exp, "nbf": time.Now().Add(time.Minute).Unix()})
	if _, err := a.User(later); flashsale.ErrorCode(err) != flashsale.EUnauthorized {
		t.Fatalf("User(nbf ahead) error = %v; want unauthorized", err)
	}
}
