package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/flashsale/flashsale"
)

var b64 = base64.RawURLEncoding

// signRaw builds a token of the header and claims JSON as written, signed
// with HMAC of h under key: what a holder of the secret could send.
func signRaw(h func() hash.Hash, key, header, claims string) string {
	signed := b64.EncodeToString([]byte(header)) + "." + b64.EncodeToString([]byte(claims))
	mac := hmac.New(h, []byte(key))
	mac.Write([]byte(signed))
	return signed + "." + b64.EncodeToString(mac.Sum(nil))
}

// ours signs claims under the header UserToken writes.
func ours(claims string) string {
	return signRaw(sha256.New, testSecret, `{"alg":"HS256","typ":"JWT"}`, claims)
}

// message is what User answers for a verify result: the user id or the
// refusal's message.
func message(g grant, err error) string {
	if err != nil {
		return "refused: " + flashsale.ErrorMessage(new(Authenticator).unauthorized(err))
	}
	return fmt.Sprintf("user %d, exp %d, in force %v", g.user, g.exp.UnixNano(), g.inForce)
}

func jsonInt(n int64) string { return strconv.FormatInt(n, 10) }

// TestIssuedHeader: the tokens UserToken signs take the in-house path.
func TestIssuedHeader(t *testing.T) {
	tok, err := newAuth(t).UserToken(1, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := strings.Cut(tok, "."); h != issuedHeader {
		t.Fatalf("UserToken's header is %q, verify's fast path expects %q", h, issuedHeader)
	}
	if _, _, ok := parseIssued(mustDecode(t, strings.Split(tok, ".")[1])); !ok {
		t.Fatalf("parseIssued refuses UserToken's claims %s", mustDecode(t, strings.Split(tok, ".")[1]))
	}
}

func mustDecode(t *testing.T, seg string) []byte {
	t.Helper()
	b, err := b64.DecodeString(seg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verifyCases are tokens at the fixed time verifyNow, with the message
// User gives ("" for accepted as user 7).
func verifyCases(t *testing.T, a *Authenticator) []struct{ name, token, want string } {
	now := verifyNow
	at := func(d time.Duration) string { return jsonInt(now.Add(d).Unix()) }
	exp := at(time.Hour)
	kid := signRaw(sha256.New, testSecret, `{"alg":"HS256","kid":"k1","typ":"JWT"}`, `{"sub":"7","exp":`+exp+`}`)
	issued, err := a.UserToken(7, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	registered := sign(t, jwt.SigningMethodHS256, []byte(testSecret), jwt.RegisteredClaims{
		Subject: "7", Issuer: "other", Audience: jwt.ClaimStrings{"a", "b"}, ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
	})
	sig := issued[strings.LastIndexByte(issued, '.')+1:]
	unsigned := issued[:len(issued)-len(sig)]
	flip := func(c byte) string { return map[bool]string{true: "B", false: "A"}[c == 'A'] }
	const notValid, expired, subject = "the token is not valid", "the token has expired", "subject is not a user id"
	huge := `{"sub":"7","exp":` + exp + `,"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	return []struct{ name, token, want string }{
		{"issued by UserToken", issued, ""},
		{"golang-jwt registered claims, aud and iss", registered, ""},
		{"another secret", signRaw(sha256.New, "another-secret-another-secret-xx", `{"alg":"HS256","typ":"JWT"}`, `{"sub":"7","exp":`+exp+`}`), notValid},
		{"signature changed", unsigned + sig[:5] + flip(sig[5]) + sig[6:], notValid},
		{"signature cut short", issued[:len(issued)-2], notValid},
		{"signature empty", unsigned, notValid},
		{"signature padded", issued + "=", notValid},
		{"signature's unused low bits flipped (golang-jwt ignores them)", unsigned + sig[:42] + string(b64Alphabet[strings.IndexByte(b64Alphabet, sig[42])^1]), ""},
		{"alg none", b64.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + strings.Split(issued, ".")[1] + ".", "the token is not signed (alg none)"},
		{"alg None", b64.EncodeToString([]byte(`{"alg":"None","typ":"JWT"}`)) + "." + strings.Split(issued, ".")[1] + ".", "the token is not signed (alg none)"},
		{"alg HS512", signRaw(sha512.New, testSecret, `{"alg":"HS512","typ":"JWT"}`, `{"sub":"7","exp":`+exp+`}`), notValid},
		{"alg RS256 with an HMAC", signRaw(sha256.New, testSecret, `{"alg":"RS256","typ":"JWT"}`, `{"sub":"7","exp":`+exp+`}`), notValid},
		{"header with kid (golang-jwt's path)", kid, ""},
		{"header keys reordered", signRaw(sha256.New, testSecret, `{"typ":"JWT","alg":"HS256"}`, `{"sub":"7","exp":`+exp+`}`), ""},
		{"header swapped for ours after signing", issuedHeader + kid[strings.IndexByte(kid, '.'):], notValid},
		{"expired beyond the leeway", ours(`{"sub":"7","exp":` + at(-6*time.Second) + `}`), expired},
		{"expired, leeway just run out", ours(`{"sub":"7","exp":` + at(-5*time.Second) + `}`), expired},
		{"expired within the leeway", ours(`{"sub":"7","exp":` + at(-4*time.Second) + `}`), ""},
		{"issued form, expired", ours(`{"sub":"7","exp":` + at(-5*time.Second) + `,"iat":` + at(-time.Hour) + `}`), expired},
		{"issued form, within the leeway", ours(`{"sub":"7","exp":` + at(-4*time.Second) + `,"iat":` + at(-time.Hour) + `}`), ""},
		{"no exp", ours(`{"sub":"7"}`), "no expiry"},
		{"exp null", ours(`{"sub":"7","exp":null}`), "no expiry"},
		{"exp a string", ours(`{"sub":"7","exp":"` + exp + `"}`), "must be JSON numbers"},
		{"iat a string", ours(`{"sub":"7","exp":` + exp + `,"iat":"1"}`), "must be JSON numbers"},
		{"exp beyond float64", ours(`{"sub":"7","exp":1e999}`), notValid},
		{"nbf ahead beyond the leeway", ours(`{"sub":"7","exp":` + exp + `,"nbf":` + at(6*time.Second) + `}`), notValid},
		{"nbf ahead within the leeway", ours(`{"sub":"7","exp":` + exp + `,"nbf":` + at(4*time.Second) + `}`), ""},
		{"no sub", ours(`{"exp":` + exp + `}`), subject},
		{"sub 007", ours(`{"sub":"007","exp":` + exp + `,"iat":1}`), subject},
		{"sub +7", ours(`{"sub":"+7","exp":` + exp + `}`), subject},
		{"sub 0", ours(`{"sub":"0","exp":` + exp + `,"iat":1}`), subject},
		{"sub past int64", ours(`{"sub":"9223372036854775808","exp":` + exp + `,"iat":1}`), subject},
		{"sub a number", ours(`{"sub":7,"exp":` + exp + `}`), notValid},
		{"sub escaped", ours(`{"sub":"\u0037","exp":` + exp + `,"iat":1}`), ""},
		{"extra claims", ours(`{"sub":"7","exp":` + exp + `,"iat":1,"jti":"x","aud":["a"],"x":{"y":[1,2]}}`), ""},
		{"spaces", ours(` { "sub" : "7" , "exp" : ` + exp + ` } `), ""},
		{"claims not an object", ours(`["7"]`), notValid},
		{"claims trailing garbage", ours(`{"sub":"7","exp":` + exp + `,"iat":1}x`), notValid},
		{"claims not base64", issuedHeader + ".*." + sig, notValid},
		{"four segments", issued + ".x", notValid},
		{"two segments", issuedHeader + ".x", notValid},
		{"empty", "", notValid},
		{"dots", "..", notValid},
		{"huge, signed", ours(huge), ""},
		{"huge, unsigned", issuedHeader + "." + strings.Repeat("A", 1<<20) + "." + sig, notValid},
	}
}

const b64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

var verifyNow = time.Unix(1_800_000_000, 0)

// TestUserVerifies runs every case through User and both paths of
// verify: golang-jwt's and the in-house one agree on each.
func TestUserVerifies(t *testing.T) {
	a := newAuth(t)
	a.now = func() time.Time { return verifyNow }
	for _, tt := range verifyCases(t, a) {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.User(tt.token)
			switch {
			case tt.want == "" && (err != nil || id != 7):
				t.Fatalf("User() = %d, %v; want 7", id, err)
			case tt.want != "" && (flashsale.ErrorCode(err) != flashsale.EUnauthorized || !strings.Contains(flashsale.ErrorMessage(err), tt.want)):
				t.Fatalf("User() = %d, %v; want unauthorized: %q", id, err, tt.want)
			}
			fast, lib := message(a.verify(tt.token, verifyNow)), message(a.verifyLibrary(tt.token, verifyNow))
			if fast != lib {
				t.Fatalf("verify: %s\nverifyLibrary: %s", fast, lib)
			}
		})
	}
}

// claimSeeds are claims in and around the form UserToken writes.
var claimSeeds = []string{
	`{"sub":"7","exp":1800003600,"iat":1800000000}`,
	`{"sub":"9223372036854775807","exp":999999999999999,"iat":1}`,
	`{"sub":"9223372036854775808","exp":1800003600,"iat":1}`,
	`{"sub":"7","exp":1800003600,"iat":1800000000,"nbf":1800000000}`,
	`{"sub":"7","exp":1000000000000000,"iat":1}`,
	`{"sub":"7","exp":01800003600,"iat":1}`,
	`{"sub":"7","exp":1800003600.5,"iat":1}`,
	`{"sub":"7","exp":-1,"iat":1}`,
	`{"sub":"7","exp":1800003600,"iat":1,"sub":"8"}`,
	`{"SUB":"7","exp":1800003600}`,
	`{"sub":"7","exp":"1800003600"}`,
	`{"sub":"7","exp":1800003600,"iat":1} `,
	`{"sub":"7","exp":1800003600,"iat":1}}`,
	`{"sub":"\u0037","exp":1800003600,"iat":1}`,
	`{"sub":"7","exp":1e9,"iat":1}`,
	`null`, `[]`, `"x"`, ``,
}

// FuzzParseIssued: whatever parseIssued takes, encoding/json reads the
// same way.
func FuzzParseIssued(f *testing.F) {
	for _, s := range claimSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sub, exp, ok := parseIssued(b)
		if !ok {
			return
		}
		var c userClaims
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("parseIssued(%s) = %d, %d; encoding/json: %v", b, sub, exp, err)
		}
		id, err := flashsale.ParseID(c.Subject)
		if err != nil || id != sub || c.ExpiresAt == nil || !c.ExpiresAt.Equal(time.Unix(exp, 0)) || c.NotBefore != nil || c.IssuedAt == nil {
			t.Fatalf("parseIssued(%s) = %d, %d; encoding/json: %+v", b, sub, exp, c)
		}
	})
}

// FuzzVerifyPathsAgree signs any claims under our header and checks that
// verify (in-house) and verifyLibrary (golang-jwt) say the same; tail is
// appended to the token, so most of those are refused by both.
func FuzzVerifyPathsAgree(f *testing.F) {
	for _, s := range claimSeeds {
		f.Add(s, "")
	}
	f.Add(`{"sub":"7","exp":1800003600}`, "x")
	f.Add(`{"sub":"7","exp":1800003600}`, ".")
	f.Add(`{"sub":"7","exp":1800003600}`, "\n")
	a := newAuth(f)
	f.Fuzz(func(t *testing.T, claims, tail string) {
		token := ours(claims) + tail
		fast, lib := message(a.verify(token, verifyNow)), message(a.verifyLibrary(token, verifyNow))
		// Under a wrong signature golang-jwt may name a fault of the claims
		// it read first; verify reads none.
		forged := !signatureValid(token) && fast == "refused: the token is not valid" && strings.HasPrefix(lib, "refused: ")
		if fast != lib && !forged {
			t.Fatalf("token %q (claims %q)\nverify: %s\nverifyLibrary: %s", token, claims, fast, lib)
		}
	})
}

// signatureValid reports whether token has three segments and the last
// is the HMAC-SHA256 of the first two under testSecret, as golang-jwt
// checks it.
func signatureValid(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	sig, err := b64.DecodeString(parts[2])
	return err == nil && jwt.SigningMethodHS256.Verify(parts[0]+"."+parts[1], sig, []byte(testSecret)) == nil
}

// TestVerifyConcurrent: goroutines sharing the pooled MAC states each get
// their own token's user.
func TestVerifyConcurrent(t *testing.T) {
	a := newAuth(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				want := int64(g*1000 + i + 1)
				tok, err := a.UserToken(want, time.Hour)
				if err == nil {
					var got grant
					got, err = a.verify(tok, time.Now())
					if err == nil && got.user != want {
						err = fmt.Errorf("token of user %d verified as user %d", want, got.user)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
