package lock

import (
	"context"
	"embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// The queue scripts share code (scripts/common.lua) and take the three keys
// and the arguments of queueArgs.
var (
	acquireScript = queueScript("acquire.lua")
	checkScript   = queueScript("check.lua")
	cancelScript  = queueScript("cancel.lua")
	releaseScript = rueidis.NewLuaScript(queueSource("release.lua")) // not idempotent: never retried
	extendScript  = rueidis.NewLuaScriptRetryable(mustRead("extend.lua"))
	renewScript   = rueidis.NewLuaScript(mustRead("renew.lua"))   // reserves fences: never retried
	reenterScript = rueidis.NewLuaScript(mustRead("reenter.lua")) // not idempotent
)

func mustRead(name string) string {
	b, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return string(b)
}

// queueScript returns the retryable script name; queueSource its source,
// with scripts/common.lua in place of its include line.
func queueScript(name string) *rueidis.Lua {
	return rueidis.NewLuaScriptRetryable(queueSource(name))
}

func queueSource(name string) string { return includeSource(name, "common.lua") }

// includeSource returns the source of script name with lib in place of its
// "-- #include <lib>" line.
func includeSource(name, lib string) string {
	include := "-- #include " + lib + "\n"
	src := mustRead(name)
	if !strings.Contains(src, include) {
		panic("lock: " + name + " does not include " + lib)
	}
	return strings.Replace(src, include, mustRead(lib), 1)
}

// keys returns the KEYS of the queue scripts for m.
func (m *Mutex) keys() []string { return m.keyList[:] }

// queueArgs returns the ARGV of the acquire, check and cancel scripts (see
// scripts/common.lua) for a caller whose turn reserves block fences if it
// is granted.
func (m *Mutex) queueArgs(token string, wait bool, block int) []string {
	return []string{token, m.settingsArg, m.leaseArg, strconv.Itoa(block), flag(wait)}
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ms formats d as whole milliseconds, at least 1.
func ms(d time.Duration) string {
	n := d.Milliseconds()
	if n < 1 {
		n = 1
	}
	return strconv.FormatInt(n, 10)
}

// maxBlock bounds the fences one script reserves for a turn.
const maxBlock = 1024

// blockFor returns the block a turn reserves to serve k acquisitions.
func blockFor(k int) int { return min(max(k, 1), maxBlock) }

// grant is what a grant brings a waiter: a lock handed over inside this
// client (lock), or a turn granted by Redis.
type grant struct {
	lock *Lock // a local handoff: the waiter's Lock, ready; nothing else is set

	fence int64         // first fence of the turn's block
	block int64         // fences in the block
	ttl   time.Duration // the lease Redis set
	// sent is a moment, by this process's clock, before Redis set the
	// lease: when a script of ours that ran before the grant was sent. The
	// lease lasts until at least sent+ttl; local handoffs rely on it.
	sent   time.Time
	pushed bool    // pushed by another client's script, not a reply to ours
	cont   *budget // the turn this grant continues (a release with keep), if any
}

// budget is what is left of a turn: the local handoffs it may still make,
// and until when.
type budget struct {
	left     int
	deadline time.Time
}

// runQueue runs a queue script and decodes its reply (see
// scripts/common.lua). The grant's sent is the moment the script was sent.
// Once sent, the script is waited for until replyGrace after ctx ends (see
// sendContext): its reply says whether the caller holds the lock or is
// queued, and a caller that gives up without it cleans up after it.
func (m *Mutex) runQueue(ctx context.Context, s *rueidis.Lua, token string, wait bool, block int) (g grant, ok bool, err error) {
	sctx, cancel := m.client.sendContext(ctx)
	defer cancel()
	sent := time.Now()
	v, err := execScript(sctx, s, m.client, m.keys(), m.queueArgs(token, wait, block)).ToMessage()
	if err != nil {
		return grant{}, false, err
	}
	if v.IsInt64() {
		f, _ := v.AsInt64()
		return grant{fence: f, ttl: m.cfg.lease, block: int64(block), sent: sent}, f > 0, nil
	}
	g, err = decodeGrant(v)
	g.sent = sent
	return g, err == nil, err
}

// decodeGrant decodes a {first fence, lease ms, block} reply.
func decodeGrant(v rueidis.RedisMessage) (grant, error) {
	a, err := v.AsIntSlice()
	if err != nil {
		return grant{}, err
	}
	if len(a) != 3 {
		return grant{}, fmt.Errorf("unexpected reply %v", a)
	}
	return grant{fence: a[0], ttl: time.Duration(a[1]) * time.Millisecond, block: max(a[2], 1)}, nil
}
