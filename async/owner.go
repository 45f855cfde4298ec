package async

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
)

// Owner is the system of record a Redis prefix belongs to. Every key
// under a prefix (vouchers, streams, buyers, the ID generator's ranges)
// describes one database's sales, so a prefix is claimed for one database
// (ClaimPrefix) and a process of another refuses to start on it.
type Owner struct {
	// ID is the database's identity (store.DB.Identity); only it is
	// compared.
	ID string `json:"id"`
	// Database says where the database is, for people (no password).
	Database string `json:"database,omitempty"`
	// By is the process that made the claim (hostname-pid-random), and
	// Claimed when.
	By      string    `json:"by,omitempty"`
	Claimed time.Time `json:"claimed"`
}

// String names the owner for a log line or an error.
func (o Owner) String() string {
	s := "database " + o.ID
	if o.Database != "" {
		s += " (" + o.Database + ")"
	}
	return s
}

// ErrPrefixOwned is wrapped by ClaimPrefix when the prefix belongs to
// another database.
var ErrPrefixOwned = errors.New("async: the Redis prefix belongs to another database")

// PrefixOwnedError says which database a prefix belongs to, and which one
// a process that wanted it has.
type PrefixOwnedError struct {
	Prefix string
	Owner  Owner // the claim in Redis
	Mine   Owner // the database of the process that was refused
}

// Error implements the error interface.
func (e *PrefixOwnedError) Error() string {
	by := ""
	if e.Owner.By != "" {
		by = " by " + e.Owner.By
	}
	return fmt.Sprintf("the Redis prefix %q belongs to %s, claimed%s at %s; this process's is %s",
		e.Prefix, e.Owner, by, e.Owner.Claimed.Format(time.RFC3339), e.Mine)
}

// Unwrap returns ErrPrefixOwned.
func (e *PrefixOwnedError) Unwrap() error { return ErrPrefixOwned }

var _ error = (*PrefixOwnedError)(nil)

// ClaimPrefix claims the prefix (DefaultPrefix when empty) for the
// database me names, or checks that it belongs to it. It reports whether
// it made the claim now: the prefix was unclaimed, because it was never
// used or because Redis lost its data (the claim with it; the first
// process to check again claims it again). When the prefix belongs to
// another database it returns a *PrefixOwnedError wrapping ErrPrefixOwned:
// two deployments would read each other's streams and take each other's
// orders. me.By and me.Claimed default to this process and now.
func ClaimPrefix(ctx context.Context, client rueidis.Client, prefix string, me Owner) (claimed bool, err error) {
	if me.ID == "" {
		return false, errors.New("async: claiming a prefix needs the database's identity")
	}
	if me.By == "" {
		me.By = layout.InstanceName()
	}
	if me.Claimed.IsZero() {
		me.Claimed = time.Now().UTC().Truncate(time.Second)
	}
	raw, err := json.Marshal(me)
	if err != nil {
		return false, err
	}
	key := layout.New(prefix).Owner()
	// The claim is written once and never changed, so SET NX then GET
	// sees either our claim or the one that won; it is read again only if
	// someone deleted it in between.
	for range 3 {
		err := client.Do(ctx, client.B().Set().Key(key).Value(string(raw)).Nx().Build()).Error()
		if err == nil {
			return true, nil
		}
		if !rueidis.IsRedisNil(err) {
			return false, fmt.Errorf("async: claiming the prefix: %w", err)
		}
		cur, err := client.Do(ctx, client.B().Get().Key(key).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("async: reading the prefix's claim: %w", err)
		}
		var owner Owner
		if err := json.Unmarshal([]byte(cur), &owner); err != nil || owner.ID == "" {
			return false, fmt.Errorf("async: the claim on the prefix (key %s) is not one flashsale wrote: %q", key, cur)
		}
		if owner.ID != me.ID {
			return false, &PrefixOwnedError{Prefix: cmp.Or(prefix, DefaultPrefix), Owner: owner, Mine: me}
		}
		return false, nil
	}
	return false, fmt.Errorf("async: the claim on the prefix (key %s) keeps vanishing", key)
}
