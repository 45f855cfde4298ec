package auth

import (
	"context"
	"fmt"

	"golang.org/x/sync/singleflight"
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
	// BuyerNumber returns the pair's number, from 1, creating it on the
	// first call; the same on every later call and from every process.
	// Two pairs that differ in a byte have two numbers.
	BuyerNumber(ctx context.Context, issuer, subject string) (int64, error)
}

// buyers maps a provider's subjects to buyer ids: from the subject cache
// when it has the pair, else from the store (one round trip; concurrent
// first requests of one buyer share it).
type buyers struct {
	store BuyerStore
	cache *subjectCache
	sf    singleflight.Group
}

func newBuyers(store BuyerStore) *buyers {
	return &buyers{store: store, cache: newSubjectCache()}
}

// id returns the buyer id of (issuer, subject).
func (b *buyers) id(ctx context.Context, issuer, subject string) (int64, error) {
	k := subjectKey{issuer, subject}
	if id, ok := b.cache.get(k); ok {
		return id, nil
	}
	v, err, _ := b.sf.Do(issuer+"\x00"+subject, func() (any, error) {
		n, err := b.store.BuyerNumber(context.WithoutCancel(ctx), issuer, subject)
		if err != nil {
			return int64(0), fmt.Errorf("%w: %w", errBuyer, err)
		}
		if n <= 0 || n >= BuyerBase {
			return int64(0), fmt.Errorf("%w: the store numbered (%q, %q) %d", errBuyer, issuer, subject, n)
		}
		b.cache.put(k, BuyerBase+n)
		return BuyerBase + n, nil
	})
	return v.(int64), err
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
