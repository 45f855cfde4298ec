package testenv

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A write acknowledged by a node with an fsync-always AOF survives a
// SIGKILL and a restart on the same directory.
func TestRedisAOFSurvivesKill(t *testing.T) {
	s := StartRedis(t, WithAOF())
	c := s.Client(t)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("acknowledged").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if s.Running() {
		t.Fatal("server still running after Kill")
	}
	down, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if err := c.Do(down, c.B().Get().Key("k").Build()).Error(); err == nil {
		t.Fatal("GET succeeded while the server was killed")
	}
	s.Start()
	got, err := c.Do(ctx, c.B().Get().Key("k").Build()).ToString()
	if err != nil || got != "acknowledged" {
		t.Fatalf("after restart: GET k = %q, %v; want acknowledged", got, err)
	}
	s.Restart()
	got, err = c.Do(ctx, c.B().Get().Key("k").Build()).ToString()
	if err != nil || got != "acknowledged" {
		t.Fatalf("after Restart: GET k = %q, %v; want acknowledged", got, err)
	}
}

// Without AOF the same write is gone after a kill: the AOF test above
// proves something.
func TestRedisWithoutAOFLosesWrite(t *testing.T) {
	s := StartRedis(t)
	c := s.Client(t)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key("k").Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if err := c.Do(ctx, c.B().Get().Key("k").Build()).Error(); !isNil(err) {
		t.Fatalf("GET k after a restart without AOF: %v; want nil", err)
	}
}

// maxmemory with noeviction refuses a write with OOM once memory is full.
func TestRedisMaxmemoryNoeviction(t *testing.T) {
	s := StartRedis(t, WithConfig("maxmemory", "2mb"), WithConfig("maxmemory-policy", "noeviction"))
	c := s.Client(t)
	ctx := context.Background()
	value := strings.Repeat("x", 64<<10)
	for i := range 200 {
		err := c.Do(ctx, c.B().Set().Key("k"+string(rune('a'+i%26))+strings.Repeat("z", i/26)).Value(value).Build()).Error()
		if err == nil {
			continue
		}
		if !strings.HasPrefix(err.Error(), "OOM") {
			t.Fatalf("write %d failed with %v; want OOM", i, err)
		}
		if i == 0 {
			t.Fatal("the first write already failed")
		}
		return
	}
	t.Fatal("12 MB written into a 2 MB noeviction server without an OOM error")
}

// Stop shuts down cleanly; the URL and Addr name the server.
func TestRedisStopStartURL(t *testing.T) {
	s := StartRedis(t)
	if want := "redis://" + s.Addr() + "/0"; s.URL() != want || !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("URL %q, Addr %q", s.URL(), s.Addr())
	}
	s.Stop()
	if err := pingRaw(s.Addr()); err == nil {
		t.Fatal("PING answered after Stop")
	}
	start := time.Now()
	s.Start()
	if err := pingRaw(s.Addr()); err != nil {
		t.Fatalf("PING after Start (%v): %v", time.Since(start), err)
	}
}

func isNil(err error) bool {
	return err != nil && strings.Contains(err.Error(), "nil")
}
