package lock

import (
	"context"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// subscribe keeps the client's one subscription alive until Close. It runs
// on a dedicated connection, never on the pipelined one the scripts use, so
// that losing it (CLIENT KILL TYPE pubsub, a proxy timeout) costs only the
// pushes in flight; after every (re)subscribe all waiters re-check, which
// recovers those.
func (c *Client) subscribe() {
	defer close(c.stopped)
	channel := c.channelPrefix + c.id
	var failures int
	for {
		if c.subscribeOnce(channel) {
			failures = 0
		} else {
			failures++
		}
		// Jittered exponential backoff: 0–20ms after a drop, up to ~1s
		// while Redis stays unreachable.
		d := time.Duration(mrand.Int64N(int64(20*time.Millisecond) << min(failures, 6)))
		t := time.NewTimer(d)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// subscribeOnce subscribes on a fresh dedicated connection and returns when
// the connection is gone or the client closes. It reports whether the
// subscription was established.
func (c *Client) subscribeOnce(channel string) bool {
	select {
	case <-c.ctx.Done():
		return true
	default:
	}
	dc, release := c.rc.Dedicate()
	defer release()
	defer dc.Close() // a subscribed connection must not go back to the pool

	errs := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: c.onMessage})
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	// The name lets operators (and the tests) find the subscriber in CLIENT LIST.
	err := dc.Do(ctx, dc.B().ClientSetname().ConnectionName("lock:sub:"+c.id).Build()).Error()
	if err == nil {
		err = dc.Do(ctx, dc.B().Subscribe().Channel(channel).Build()).Error()
	}
	if err != nil {
		return false
	}
	c.resync()
	select {
	case <-errs:
	case <-c.ctx.Done():
	}
	return true
}

// onMessage decodes a grant pushed by a handoff:
// "<token> <first fence> <lease ms> <block>".
func (c *Client) onMessage(m rueidis.PubSubMessage) {
	f := strings.Fields(m.Message)
	if len(f) != 4 {
		return
	}
	fence, err1 := strconv.ParseInt(f[1], 10, 64)
	ttl, err2 := strconv.ParseInt(f[2], 10, 64)
	block, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	c.deliver(f[0], grant{fence: fence, ttl: time.Duration(ttl) * time.Millisecond, block: max(block, 1)})
}
