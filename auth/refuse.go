package auth

import (
	"errors"
	"sync/atomic"

	"github.com/flashsale/flashsale"
)

// The reasons a user token is refused. Each has its own message (the
// 401's) and its own label in Stats and flashsale_auth_refused_total.
var (
	errExpired     = errors.New("auth: the token has expired")
	errNoExpiry    = errors.New("auth: the token has no exp")
	errNotYetValid = errors.New("auth: the token's nbf is ahead")
	errInvalid     = errors.New("auth: the token is malformed or its signature is wrong")
	errSubject     = errors.New("the token's subject is not a user id")
	// errNotNumericDate is returned for a time claim that is not a JSON number.
	errNotNumericDate = errors.New("auth: a time claim is not a JSON number")

	errAlgNone     = errors.New("auth: alg none")
	errAlgHMAC     = errors.New("auth: an HMAC token names a provider's issuer")
	errNoKID       = errors.New("auth: the token names no key (kid)")
	errUnknownKID  = errors.New("auth: the token's kid is not among the provider's keys")
	errKeyMismatch = errors.New("auth: the token's alg does not fit its key")
	errIssuer      = errors.New("auth: the token's issuer is not trusted")
	errAudience    = errors.New("auth: the token is not for this audience")
	errBuyer       = errors.New("auth: the buyer's id could not be read")
)

// refusals lists every reason in order: its sentinel, its label and the
// message a client gets.
var refusals = []struct {
	err   error
	label string
	msg   string
}{
	{errExpired, "expired", "the token has expired"},
	{errNoExpiry, "no_expiry", "the token has no expiry (exp)"},
	{errNotYetValid, "not_yet_valid", "the token is not valid yet (nbf)"},
	{errNotNumericDate, "malformed", "the token's exp, nbf and iat must be JSON numbers (seconds since 1970)"},
	{errSubject, "subject", ""}, // the error's own text
	{errAlgNone, "alg_none", "the token is not signed (alg none)"},
	{errAlgHMAC, "alg_confusion", "the token is signed with an HMAC (HS*) but names an identity provider's issuer, whose keys are public"},
	{errNoKID, "no_kid", "the token names no key (kid)"},
	{errUnknownKID, "unknown_kid", "the token's key (kid) is not among the identity provider's keys"},
	{errKeyMismatch, "key_mismatch", "the token's alg does not fit the provider's key it names"},
	{errIssuer, "issuer", "the token's issuer (iss) is not trusted"},
	{errAudience, "audience", "the token is not for this service (aud)"},
	{errBuyer, "buyer", "the buyer could not be looked up; try again"},
	{errInvalid, "invalid", "the token is not valid"},
}

// refusalIndex is the index in refusals of err's reason ("invalid" for
// any other error).
func refusalIndex(err error) int {
	for i, r := range refusals {
		if errors.Is(err, r.err) {
			return i
		}
	}
	return len(refusals) - 1
}

// refusalCounts counts refusals by reason.
type refusalCounts [16]atomic.Uint64

// unauthorized is the error User answers for why a token was refused,
// counted: EUnauthorized, or EUnavailable when the buyer could not be
// looked up.
func (a *Authenticator) unauthorized(err error) error {
	i := refusalIndex(err)
	a.refused[i].Add(1)
	r := refusals[i]
	switch {
	case r.err == errBuyer:
		return flashsale.Errorf(flashsale.EUnavailable, "%s", r.msg)
	case r.msg == "":
		return flashsale.Errorf(flashsale.EUnauthorized, "%v", err)
	default:
		return flashsale.Errorf(flashsale.EUnauthorized, "%s", r.msg)
	}
}

// Stats are the Authenticator's counters.
type Stats struct {
	// Refused counts the tokens refused, by reason: expired, no_expiry,
	// not_yet_valid, malformed, subject, alg_none, alg_confusion, no_kid,
	// unknown_kid, key_mismatch, issuer, audience, buyer (the store of
	// buyer ids failed), invalid.
	Refused map[string]uint64
	// Tokens is how many verified tokens are cached; Subjects how many
	// subjects' buyer ids.
	Tokens, Subjects int
	// UnknownKIDs counts the tokens naming a kid not among the provider's
	// keys as last read (each tries a rate-limited refresh);
	// KeyRefreshFailures the failed reads of the keys.
	UnknownKIDs, KeyRefreshFailures uint64
	// ProviderTokens counts the provider's tokens whose signature was
	// checked with a key of the provider: those the token cache did not
	// answer for, once for the requests of a token that arrived together
	// (again for a request that waited on one whose own request ended).
	ProviderTokens uint64
}

// Stats returns the counters.
func (a *Authenticator) Stats() Stats {
	s := Stats{Refused: make(map[string]uint64, len(refusals)), Tokens: a.cache.size()}
	for i, r := range refusals {
		s.Refused[r.label] = a.refused[i].Load()
	}
	if a.oidc != nil {
		s.Subjects = a.oidc.buyers.cache.size()
		s.UnknownKIDs, s.KeyRefreshFailures = a.oidc.unknown.Load(), a.oidc.refreshFailures.Load()
		s.ProviderTokens = a.oidc.checked.Load()
	}
	return s
}

func (c *subjectCache) size() int {
	n := 0
	for i := range c.shards {
		n += c.shards[i].len()
	}
	return n
}
