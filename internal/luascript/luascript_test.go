package luascript_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/internal/luascript"
	"github.com/flashsale/flashsale/internal/testenv"
)

const echoSrc = `return {KEYS[1], ARGV[1]}`

// execs returns n execs, each on its own key, "k<i>" → "v<i>".
func execs(prefix string, n int) []rueidis.LuaExec {
	m := make([]rueidis.LuaExec, n)
	for i := range m {
		m[i] = rueidis.LuaExec{Keys: []string{prefix + "k" + strconv.Itoa(i)}, Args: []string{"v" + strconv.Itoa(i)}}
	}
	return m
}

// checkEchoes fails unless every result echoes its exec's key and arg.
func checkEchoes(t *testing.T, m []rueidis.LuaExec, res []rueidis.RedisResult) {
	t.Helper()
	if len(res) != len(m) {
		t.Fatalf("%d results for %d execs", len(res), len(m))
	}
	for i, r := range res {
		got, err := r.AsStrSlice()
		if err != nil || len(got) != 2 || got[0] != m[i].Keys[0] || got[1] != m[i].Args[0] {
			t.Fatalf("exec %d: %v, %v; want [%s %s]", i, got, err, m[i].Keys[0], m[i].Args[0])
		}
	}
}

func TestExecMultiIsOneRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  *luascript.Script
		evalsha string // the command it runs as
	}{
		{"writes", luascript.New(echoSrc), "evalsha"},
		{"read-only", luascript.NewReadOnly(echoSrc), "evalsha_ro"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.StartRedis(t).Client(t)
			ctx := context.Background()
			m := execs("", 3)
			checkEchoes(t, m, tc.script.ExecMulti(ctx, c, m...)) // a fresh server: NOSCRIPT, then EVAL
			if err := c.Do(ctx, c.B().ConfigResetstat().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			checkEchoes(t, m, tc.script.ExecMulti(ctx, c, m...))
			calls := testenv.CommandCalls(t, c)
			if calls[tc.evalsha] != 3 || calls["script"] != 0 || calls["eval"]+calls["eval_ro"] != 0 {
				t.Fatalf("3 execs sent %v; want 3 %s, no SCRIPT LOAD or EVAL", calls, tc.evalsha)
			}
			if err := c.Do(ctx, c.B().ScriptFlush().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			checkEchoes(t, m, tc.script.ExecMulti(ctx, c, m...)) // forgotten: EVAL again
		})
	}
}

// TestExecMultiOnCluster runs execs whose keys are spread over every master
// of a cluster, and checks that no master got SCRIPT LOAD.
func TestExecMultiOnCluster(t *testing.T) {
	cl := testenv.StartCluster(t, testenv.WithoutReplicas())
	c := cl.Client(t)
	ctx := context.Background()
	s := luascript.New(echoSrc)
	m := execs(testenv.Unique()+":", 30)
	checkEchoes(t, m, s.ExecMulti(ctx, c, m...)) // each master: NOSCRIPT, then EVAL
	for _, n := range cl.Masters() {
		nc := n.Client(t)
		if err := nc.Do(ctx, nc.B().ConfigResetstat().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	checkEchoes(t, m, s.ExecMulti(ctx, c, m...))
	total := 0
	for _, n := range cl.Masters() {
		calls := testenv.CommandCalls(t, n.Client(t))
		if calls["script"] != 0 || calls["eval"] != 0 {
			t.Errorf("master %s got %v; want no SCRIPT LOAD or EVAL", n.Addr(), calls)
		}
		total += calls["evalsha"]
	}
	if total != len(m) {
		t.Errorf("the masters ran %d EVALSHA for %d execs", total, len(m))
	}
}
