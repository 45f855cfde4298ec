package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// DenyList is who may neither queue nor order: user ids, buyers of the
// identity provider by their subject, and client addresses as CIDR
// prefixes (a bare address is its own /32 or /128).
type DenyList struct {
	Users    []string        `json:"users"`
	IPs      []string        `json:"ips"`
	Subjects []DeniedSubject `json:"subjects,omitempty"`
}

// DeniedSubject is a buyer as the shop knows it, (issuer, subject), and
// the buyer's id, which whoever sets the list fills in (httpapi, through
// auth.Authenticator.Buyer): the list is checked by id.
type DeniedSubject struct {
	Issuer  string `json:"issuer"`
	Subject string `json:"subject"`
	User    string `json:"user,omitempty"`
}

// Bounds of the deny list.
const (
	MaxDeniedUsers    = 100_000
	MaxDeniedPrefixes = 10_000
)

// denyRefresh is how old an instance's copy of the deny list may get: a
// list set on one instance holds on the others within it. A copy is
// refreshed in the background of one request once it is denyStale old, so
// requests rarely wait for the read.
const (
	denyRefresh = time.Second
	denyStale   = denyRefresh / 2
)

// compiled is a deny list ready to check.
type compiled struct {
	list     DenyList
	users    map[int64]bool
	prefixes []netip.Prefix
	at       time.Time
}

// denyCache is an instance's copy of the deny list.
type denyCache struct {
	cur  atomic.Pointer[compiled]
	load sync.Mutex
	// failed and failure are the last failed read (under load): the
	// requests queued behind it get its error, not a read each.
	failed  time.Time
	failure error
}

// compile checks d and returns it in its canonical form (ids as written
// by ParseID, prefixes masked), or EInvalid.
func compile(d DenyList) (*compiled, error) {
	if len(d.Users)+len(d.Subjects) > MaxDeniedUsers || len(d.IPs) > MaxDeniedPrefixes {
		return nil, flashsale.Errorf(flashsale.EInvalid, "the deny list holds at most %d users and %d ips", MaxDeniedUsers, MaxDeniedPrefixes)
	}
	c := &compiled{list: DenyList{Users: []string{}, IPs: []string{}}, users: map[int64]bool{}}
	for _, u := range d.Users {
		id, err := flashsale.ParseID(u)
		if err != nil {
			return nil, flashsale.Errorf(flashsale.EInvalid, "users: %v", err)
		}
		if !c.users[id] {
			c.users[id] = true
			c.list.Users = append(c.list.Users, strconv.FormatInt(id, 10))
		}
	}
	for _, s := range d.Subjects {
		id, err := flashsale.ParseID(s.User)
		if err != nil {
			return nil, flashsale.Errorf(flashsale.EInvalid, "subjects: (%q, %q) has no buyer id: %v", s.Issuer, s.Subject, err)
		}
		c.users[id] = true
		c.list.Subjects = append(c.list.Subjects, s)
	}
	for _, s := range d.IPs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				return nil, flashsale.Errorf(flashsale.EInvalid, "ips: %q is not a CIDR prefix such as 203.0.113.0/24 or 2001:db8::/32", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		if p.Addr().Is4In6() {
			if p.Bits() < 96 {
				return nil, flashsale.Errorf(flashsale.EInvalid, "ips: %q mixes IPv4-mapped and IPv6 addresses; give the IPv4 prefix", s)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		p = p.Masked()
		c.prefixes = append(c.prefixes, p)
		c.list.IPs = append(c.list.IPs, p.String())
	}
	return c, nil
}

// SetDenyList replaces the deny list and returns it as kept; EInvalid for
// a malformed one. It holds on every instance within a second.
func (q *Queue) SetDenyList(ctx context.Context, d DenyList) (DenyList, error) {
	c, err := compile(d)
	if err != nil {
		return DenyList{}, err
	}
	b, err := json.Marshal(c.list)
	if err != nil {
		return DenyList{}, fmt.Errorf("admission: deny list: %w", err)
	}
	if err := q.client.Do(ctx, q.client.B().Set().Key(q.keys.denyList()).Value(string(b)).Build()).Error(); err != nil {
		return DenyList{}, unavailable("set the deny list", err)
	}
	c.at = time.Now()
	q.deny.cur.Store(c)
	return c.list, nil
}

// DenyList returns the deny list (empty when none was set).
func (q *Queue) DenyList(ctx context.Context) (DenyList, error) {
	c, err := q.loadDeny(ctx)
	if err != nil {
		return DenyList{}, err
	}
	return c.list, nil
}

// Denied reports whether the user, or the client address (when valid), is
// on the deny list, as this instance last read it (at most a second ago).
func (q *Queue) Denied(ctx context.Context, userID int64, ip netip.Addr) (bool, error) {
	c := q.deny.cur.Load()
	switch {
	case c == nil || time.Since(c.at) > denyRefresh:
		// The first check, or a copy too old to use: wait for a fresh one
		// (which another request may have read meanwhile).
		var err error
		if c, err = q.loadDenyFresh(ctx); err != nil {
			return false, err
		}
	case time.Since(c.at) > denyStale && q.deny.load.TryLock():
		// One request reloads; the others check the copy they have.
		if fresh, err := q.loadDenyLocked(ctx); err == nil {
			c = fresh
		}
		q.deny.load.Unlock()
	}
	if c.users[userID] {
		return true, nil
	}
	if ip.IsValid() {
		ip = ip.WithZone("").Unmap() // a zoned address is contained by no prefix
		for _, p := range c.prefixes {
			if p.Contains(ip) {
				return true, nil
			}
		}
	}
	return false, nil
}

// loadDeny reads the deny list from Redis into the cache.
func (q *Queue) loadDeny(ctx context.Context) (*compiled, error) {
	q.deny.load.Lock()
	defer q.deny.load.Unlock()
	return q.loadDenyLocked(ctx)
}

// loadDenyFresh returns the cached copy if it is at most denyStale old
// once the lock is held, else reads the list.
func (q *Queue) loadDenyFresh(ctx context.Context) (*compiled, error) {
	q.deny.load.Lock()
	defer q.deny.load.Unlock()
	if c := q.deny.cur.Load(); c != nil && time.Since(c.at) <= denyStale {
		return c, nil
	}
	if time.Since(q.deny.failed) < denyRetry {
		return nil, q.deny.failure
	}
	c, err := q.loadDenyLocked(ctx)
	if err != nil {
		q.deny.failed, q.deny.failure = time.Now(), err
	}
	return c, err
}

// denyRetry is how long after a failed read of the deny list the requests
// that need one answer its error without reading again.
const denyRetry = 100 * time.Millisecond

// loadDenyLocked reads the list. The copy's time is taken before the
// read, so a copy never holds a list older than its time; and it is kept
// only if no newer copy was meanwhile (SetDenyList's, which takes no
// lock): a read that began before a PUT does not undo it.
func (q *Queue) loadDenyLocked(ctx context.Context) (*compiled, error) {
	at := time.Now()
	s, err := q.client.Do(ctx, q.client.B().Get().Key(q.keys.denyList()).Build()).ToString()
	var d DenyList
	switch {
	case rueidisNil(err):
	case err != nil:
		return nil, unavailable("read the deny list", err)
	default:
		if err := json.Unmarshal([]byte(s), &d); err != nil {
			return nil, fmt.Errorf("admission: the deny list in Redis: %w", err)
		}
	}
	c, err := compile(d)
	if err != nil {
		return nil, fmt.Errorf("admission: the deny list in Redis: %w", err)
	}
	c.at = at
	return q.keepDeny(c), nil
}

// keepDeny makes c the instance's copy of the deny list unless the copy
// it has is newer, and returns the copy it keeps.
func (q *Queue) keepDeny(c *compiled) *compiled {
	for {
		cur := q.deny.cur.Load()
		if cur != nil && cur.at.After(c.at) {
			return cur
		}
		if q.deny.cur.CompareAndSwap(cur, c) {
			return c
		}
	}
}
