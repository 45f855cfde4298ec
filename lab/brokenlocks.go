package lab

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/strategy"
)

// The seeds' Redis locks, reproduced — DELIBERATELY BROKEN — so that the
// lab can show what each lets through when a holder is paused past its
// lease (flashsale serve --strategy stocklock --lock KIND --pause D). They
// have no fencing token, so a stale holder's write always goes through;
// each has its own flaw besides. Never use them for anything else; the
// lock package is the working one. They wait by polling, as the seeds do.

// BrokenLocks lists the kinds NewBrokenLocker makes, and the flaw of each.
var BrokenLocks = map[string]string{
	"setnx":        "SET NX with an expiry but no owner: Unlock deletes whoever holds the lock now",
	"checkdel":     "owner token, but Unlock checks (GET) then deletes (DEL) in two calls: the lock can change hands between them",
	"getset":       "SETNX of an expiry time, taken over with GETSET once it is past: clocks decide, and Unlock deletes whoever holds it",
	"setnx-expire": "SETNX then EXPIRE in two calls: a holder that dies between them leaves the lock forever; Unlock deletes whoever holds it",
}

// NewBrokenLocker returns the deliberately broken lock kind (see
// BrokenLocks) on rc, its keys under prefix, with a lease of lease.
func NewBrokenLocker(kind string, rc rueidis.Client, prefix string, lease time.Duration) (strategy.Locker, error) {
	if _, ok := BrokenLocks[kind]; !ok {
		return nil, fmt.Errorf("lab: unknown broken lock %q", kind)
	}
	return &brokenLocker{kind: kind, rc: rc, prefix: prefix, lease: lease}, nil
}

type brokenLocker struct {
	kind   string
	rc     rueidis.Client
	prefix string
	lease  time.Duration
}

// brokenHold is a hold of a broken lock: no fence.
type brokenHold struct {
	l     *brokenLocker
	key   string
	token string
}

func (h *brokenHold) Fence() int64 { return 0 }

// Lock polls every 1–3ms until the kind's acquisition succeeds or ctx ends.
func (l *brokenLocker) Lock(ctx context.Context, name string) (strategy.Held, error) {
	h := &brokenHold{l: l, key: l.prefix + "broken:{" + name + "}", token: strconv.FormatUint(mrand.Uint64(), 16)}
	for {
		ok, err := l.try(ctx, h)
		if err != nil || ok {
			return h, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond + mrand.N(2*time.Millisecond)):
		}
	}
}

// try makes one attempt of the kind's acquisition.
func (l *brokenLocker) try(ctx context.Context, h *brokenHold) (bool, error) {
	rc := l.rc
	switch l.kind {
	case "setnx", "checkdel":
		err := rc.Do(ctx, rc.B().Set().Key(h.key).Value(h.token).Nx().Px(l.lease).Build()).Error()
		return err == nil, ignoreNil(err)
	case "setnx-expire":
		ok, err := rc.Do(ctx, rc.B().Setnx().Key(h.key).Value(h.token).Build()).AsBool()
		if err != nil || !ok {
			return false, err
		}
		return true, rc.Do(ctx, rc.B().Pexpire().Key(h.key).Milliseconds(l.lease.Milliseconds()).Build()).Error()
	default: // getset
		now := time.Now()
		expires := strconv.FormatInt(now.Add(l.lease).UnixMilli(), 10)
		ok, err := rc.Do(ctx, rc.B().Setnx().Key(h.key).Value(expires).Build()).AsBool()
		if err != nil || ok {
			return ok, err
		}
		seen, err := rc.Do(ctx, rc.B().Get().Key(h.key).Build()).AsInt64()
		if err != nil || seen > now.UnixMilli() {
			return false, ignoreNil(err)
		}
		old, err := rc.Do(ctx, rc.B().Getset().Key(h.key).Value(expires).Build()).AsInt64()
		return err == nil && old == seen, ignoreNil(err)
	}
}

// Unlock releases the hold the kind's way.
func (h *brokenHold) Unlock(ctx context.Context) error {
	rc := h.l.rc
	if h.l.kind == "checkdel" {
		v, err := rc.Do(ctx, rc.B().Get().Key(h.key).Build()).ToString()
		if err != nil || v != h.token {
			return ignoreNil(err)
		}
	}
	return rc.Do(ctx, rc.B().Del().Key(h.key).Build()).Error()
}

func ignoreNil(err error) error {
	if rueidis.IsRedisNil(err) {
		return nil
	}
	return err
}
