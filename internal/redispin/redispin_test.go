package redispin_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/internal/redispin"
	"github.com/flashsale/flashsale/internal/testenv"
)

// unwrappedEnv makes TestRetriedCommandsAreNotRecycled use the client
// unwrapped, and cut connections unwrappedCuts times: the reproduction
// TestRueidisStillRecyclesRetriedCommands runs.
const (
	unwrappedEnv  = "REDISPIN_UNWRAPPED"
	unwrappedCuts = 500
)

// readScript is a retryable script: ExecMulti sends it with DoMulti.
var readScript = rueidis.NewLuaScriptReadOnly(`return redis.call("GET", KEYS[1])`)

// TestRetriedCommandsAreNotRecycled sends retryable commands (Do, and
// DoMulti through Lua's ExecMulti) from 64 goroutines while the server
// cuts their connections 100 times, every 5ms. MaxFlushDelay makes each
// writer hold a batch's first command, taken but not yet read, for up to
// 20ms: a cut then has it retried and (unwrapped) recycled before the
// writer reads it, which, unwrapped, shows the race within a few cuts;
// with default options the window is microseconds wide (one 8s run in 2).
func TestRetriedCommandsAreNotRecycled(t *testing.T) {
	srv := testenv.StartRedis(t)
	opt := srv.ClientOption()
	opt.MaxFlushDelay = 20 * time.Millisecond
	raw, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rc, cuts := redispin.Wrap(raw), 100
	if redispin.Wrap(rc) != rc {
		t.Fatal("Wrap wrapped a wrapped client again")
	}
	if os.Getenv(unwrappedEnv) != "" {
		rc, cuts = raw, unwrappedCuts
	}
	opt.DisableRetry, opt.MaxFlushDelay = true, 0
	admin, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	ctx, cancel := context.WithCancel(context.Background()) // until the cuts are done
	defer cancel()
	var answered, multiAnswered atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				key := "pin:" + strconv.Itoa(i%100)
				if g%2 == 0 {
					if err := rc.Do(ctx, rc.B().Get().Key(key).Build()).Error(); rueidis.IsRedisNil(err) {
						answered.Add(1)
					}
					continue
				}
				for _, r := range readScript.ExecMulti(ctx, rc, rueidis.LuaExec{Keys: []string{key}}, rueidis.LuaExec{Keys: []string{key + ":b"}}) {
					if rueidis.IsRedisNil(r.Error()) {
						multiAnswered.Add(1)
					}
				}
			}
		})
	}
	for kills := 0; kills < cuts; {
		time.Sleep(5 * time.Millisecond)
		n, err := admin.Do(ctx, admin.B().ClientKill().TypeNormal().Build()).AsInt64()
		if err == nil && n > 0 {
			kills++
		}
	}
	cancel()
	wg.Wait()
	t.Logf("answers: %d by Do, %d by DoMulti", answered.Load(), multiAnswered.Load())
	if answered.Load() == 0 || multiAnswered.Load() == 0 {
		t.Errorf("answers: %d by Do, %d by DoMulti; want both > 0", answered.Load(), multiAnswered.Load())
	}
}

// TestRueidisStillRecyclesRetriedCommands runs
// TestRetriedCommandsAreNotRecycled on the client unwrapped, in a test
// binary of its own built with -race and halting at the first race, and
// wants the race Wrap works around: rueidis's connection writer reading a
// command that a Builder has taken from the pool again. It fails when
// rueidis no longer races: then Wrap can go (see the package comment).
func TestRueidisStillRecyclesRetriedCommands(t *testing.T) {
	cmd := exec.Command(raceBinary(t), "-test.run=^TestRetriedCommandsAreNotRecycled$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), unwrappedEnv+"=1", "GORACE=halt_on_error=1")
	out, err := cmd.CombinedOutput()
	race := bytes.Index(out, []byte("WARNING: DATA RACE"))
	switch {
	case race >= 0 && bytes.Contains(out[race:], []byte("rueidis.(*pipe)._backgroundWrite")):
		t.Logf("unwrapped, rueidis %s races as Wrap expects:\n%s", rueidisVersion(), firstLines(out[race:], 12))
	case err == nil:
		t.Fatalf("unwrapped, rueidis %s did not race in %d connection cuts: it no longer recycles a "+
			"retried command a broken connection may still read, and redispin.Wrap may go (see its package comment)\n%s",
			rueidisVersion(), unwrappedCuts, out)
	default:
		t.Fatalf("the unwrapped run failed otherwise: %v\n%s", err, out)
	}
}

// raceBinary returns this package's test binary built with -race: this
// one if it is.
func raceBinary(t *testing.T) string {
	if raceEnabled {
		return os.Args[0]
	}
	bin := filepath.Join(t.TempDir(), "redispin.test")
	if out, err := exec.Command("go", "test", "-race", "-c", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building the test binary with -race: %v\n%s", err, out)
	}
	return bin
}

// rueidisVersion returns the version of rueidis the module requires.
func rueidisVersion() string {
	mod, err := os.ReadFile(filepath.Join("..", "..", "go.mod"))
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "github.com/redis/rueidis" {
			return f[1]
		}
	}
	return fmt.Sprintf("(version not found in go.mod: %v)", err)
}

func firstLines(b []byte, n int) []byte {
	lines := bytes.SplitAfterN(b, []byte("\n"), n+1)
	return bytes.Join(lines[:min(n, len(lines))], nil)
}
