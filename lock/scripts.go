package lock

import (
	"context"
	"embed"
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

func queueSource(name string) string {
	const include = "-- #include common.lua\n"
	src := mustRead(name)
	if !strings.Contains(src, include) {
		panic("lock: " + name + " does not include common.lua")
	}
	return strings.Replace(src, include, mustRead("common.lua"), 1)
}

// keys returns the KEYS of the queue scripts for m.
func (m *Mutex) keys() []string { return m.keyList[:] }

// queueArgs returns the ARGV of the queue scripts (see scripts/common.lua).
func (m *Mutex) queueArgs(token string, wait bool) []string {
	return []string{token, m.leaseArg, m.settingsArg, flag(wait)}
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

// grant is a lock handed to a token: its fence and its lease in Redis at the
// time of the grant.
type grant struct {
	fence int64
	ttl   time.Duration
	// local grants come from a release in this client, which measured
	// their start; start is zero for grants pushed by Redis.
	local bool
	start time.Time
}

// detach returns the context a script is sent with. Once sent, a script is
// waited for whatever happens to ctx: rueidis cannot unsend a command, so a
// script abandoned on cancellation could run after the cleanup that was
// meant to follow it (say, on another pipelined connection), and leave a
// queue entry or a grant nobody owns. Callers check ctx before sending
// instead; cancellation thus takes effect within one round trip.
func detach(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// runQueue runs a queue script and decodes its {1, fence, ttl} / {0} reply.
func (m *Mutex) runQueue(ctx context.Context, s *rueidis.Lua, token string, wait bool) (g grant, ok bool, err error) {
	v, err := s.Exec(detach(ctx), m.client.rc, m.keys(), m.queueArgs(token, wait)).AsIntSlice()
	if err != nil {
		return grant{}, false, err
	}
	if len(v) == 3 && v[0] == 1 {
		return grant{fence: v[1], ttl: time.Duration(v[2]) * time.Millisecond}, true, nil
	}
	return grant{}, false, nil
}
