package auth

import (
	"context"
	"fmt"
	"strconv"
)

// BuyerBase is the first buyer id of a provider's subject: the id of
// (issuer, subject) is BuyerBase + its number in the store, so it never
// equals the number of an HS256 token's subject, which must be below
// BuyerBase once a provider is in use. An HS256 subject keeps meaning the
// buyer it always meant.
const BuyerBase int64 = 1 << 62

// MaxSubjectLen bounds a provider's subject (and issuer), in bytes.
const MaxSubjectLen = 255

// BuyerStore numbers the (issuer, subject) pairs durably: *store.DB.
type BuyerStore interface {
	// BuyerNumbers returns the numbers of an issuer's subjects (at most
	// BuyerBatch), from 1, in the order given, creating those not numbered
	// yet: the same on every later call and from every process, durable
	// when it returns. Two pairs that differ in a byte have two numbers.
	BuyerNumbers(ctx context.Context, issuer string, subjects []string) ([]int64, error)
	// BuyerSubject returns the pair BuyerNumbers numbered n; an error
	// whose flashsale code is ENotFound when none was.
	BuyerSubject(ctx context.Context, n int64) (issuer, subject string, err error)
}

// buyers maps a provider's subjects to buyer ids: from the subject cache
// when it has the pair, else from the store, new subjects numbered in
// batches (numbering).
type buyers struct {
	cache *subjectCache
	new   *numbering
}

func newBuyers(store BuyerStore) *buyers {
	cache := newSubjectCache()
	return &buyers{cache: cache, new: newNumbering(store, cache)}
}

// id returns the buyer id of (issuer, subject).
func (b *buyers) id(ctx context.Context, issuer, subject string) (int64, error) {
	k := subjectKey{issuer, subject}
	if id, ok := b.cache.get(k); ok {
		return id, nil
	}
	return b.new.number(ctx, k)
}

// Buyer returns the buyer id of a provider's subject, as a token of that
// issuer naming that subject would be given: for the deny list, which
// takes subjects as the shop knows them. EInvalid-worthy errors name the
// fault; ErrNoProvider when no provider is in use.
func (a *Authenticator) Buyer(ctx context.Context, issuer, subject string) (int64, error) {
	if a.oidc == nil {
		return 0, ErrNoProvider
	}
	if issuer != a.oidc.p.Issuer {
		return 0, fmt.Errorf("%w: issuer %q is not %q", ErrSubject, issuer, a.oidc.p.Issuer)
	}
	if err := checkSubject(subject); err != nil {
		return 0, err
	}
	return a.oidc.buyers.id(ctx, issuer, subject)
}

// Subject returns who buyer id is, as the shop knows the buyer: for an
// identity provider's buyer (id from BuyerBase, with a provider in use)
// the issuer and subject of its tokens, read from the store (ENotFound
// for an id never given); for any other id, an HS256 token's buyer, an
// empty issuer and the id itself as the subject. Events and orders carry
// buyer ids; this maps them back. Without a provider every id reads as
// an HS256 buyer's: a server that no longer trusts a provider does not
// read its buyers' subjects.
func (a *Authenticator) Subject(ctx context.Context, id int64) (issuer, subject string, err error) {
	if a.oidc == nil || id < BuyerBase {
		return "", strconv.FormatInt(id, 10), nil
	}
	return a.oidc.buyers.subject(ctx, id-BuyerBase)
}

// subject returns the pair the store numbered n.
func (b *buyers) subject(ctx context.Context, n int64) (issuer, subject string, err error) {
	return b.new.store.BuyerSubject(ctx, n)
}

// Errors of Buyer.
var (
	ErrNoProvider = fmt.Errorf("auth: no identity provider is in use (serve --oidc-issuer or --jwks-url)")
	ErrSubject    = fmt.Errorf("auth: not a subject of the identity provider")
)

// checkSubject refuses an empty or too long subject.
func checkSubject(s string) error {
	if s == "" || len(s) > MaxSubjectLen {
		return fmt.Errorf("%w: a subject is 1 to %d bytes, got %d", ErrSubject, MaxSubjectLen, len(s))
	}
	return nil
}
