// Package luascript is rueidis's Lua script with an ExecMulti that costs
// one round trip.
//
// rueidis's Lua.ExecMulti (v1.0.79) sends SCRIPT LOAD to every node before
// its EVALSHAs, on every call: a second round trip, on a cluster one to
// every master, and Redis hashing the whole script again. Script.ExecMulti
// sends the EVALSHAs alone, and EVAL only for a node that answers NOSCRIPT
// (restarted empty, new, or flushed), as Exec does for one call.
package luascript

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// Script is a Lua script. Exec is rueidis's.
type Script struct {
	*rueidis.Lua
	sha      string
	readOnly bool
}

// New returns a script that may write.
func New(src string) *Script { return newScript(src, rueidis.NewLuaScript(src), false) }

// NewReadOnly returns a script that only reads: it runs as EVALSHA_RO (and
// EVAL_RO), which rueidis may retry and a replica may answer.
func NewReadOnly(src string) *Script {
	return newScript(src, rueidis.NewLuaScriptReadOnly(src), true)
}

func newScript(src string, lua *rueidis.Lua, readOnly bool) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Lua: lua, sha: hex.EncodeToString(sum[:]), readOnly: readOnly}
}

// ExecMulti runs the script once per exec, in one round trip when every
// node has it; a node that has not gets EVAL for its execs, one by one.
// Each exec's keys must be in one slot on a cluster.
func (s *Script) ExecMulti(ctx context.Context, c rueidis.Client, multi ...rueidis.LuaExec) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(multi))
	for i, m := range multi {
		if s.readOnly {
			cmds[i] = c.B().EvalshaRo().Sha1(s.sha).Numkeys(int64(len(m.Keys))).Key(m.Keys...).Arg(m.Args...).Build()
		} else {
			cmds[i] = c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(m.Keys))).Key(m.Keys...).Arg(m.Args...).Build()
		}
	}
	res := c.DoMulti(ctx, cmds...)
	for i, r := range res {
		if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() {
			res[i] = s.Exec(ctx, c, multi[i].Keys, multi[i].Args)
		}
	}
	return res
}
