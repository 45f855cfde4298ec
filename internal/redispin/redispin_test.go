package redispin_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/internal/redispin"
	"github.com/flashsale/flashsale/internal/testenv"
)

// readScript is a retryable script: ExecMulti sends it with DoMulti.
var readScript = rueidis.NewLuaScriptReadOnly(`return redis.call("GET", KEYS[1])`)

// TestRetriedCommandsAreNotRecycled sends retryable commands (Do and
// DoMulti) from 64 goroutines while their connections are killed every few
// milliseconds, so rueidis retries commands whose first connection broke.
// Under -race, without Wrap (rc used as it is), this reports the data race
// described in the package comment within a few seconds.
func TestRetriedCommandsAreNotRecycled(t *testing.T) {
	srv := testenv.StartRedis(t)
	opt := srv.ClientOption()
	raw, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rc := redispin.Wrap(raw)
	if redispin.Wrap(rc) != rc {
		t.Fatal("Wrap wrapped a wrapped client again")
	}
	opt.DisableRetry = true
	admin, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
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
	kills := 0
	for ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
		n, err := admin.Do(ctx, admin.B().ClientKill().TypeNormal().Build()).AsInt64()
		if err == nil && n > 0 {
			kills++
		}
	}
	wg.Wait()
	if kills < 100 {
		t.Errorf("connections were cut %d times, want at least 100", kills)
	}
	if answered.Load() == 0 || multiAnswered.Load() == 0 {
		t.Errorf("answers: %d by Do, %d by DoMulti; want both > 0", answered.Load(), multiAnswered.Load())
	}
}
