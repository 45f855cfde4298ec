package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

type graceKey struct{}

// uncomparableCtx is a context whose type == panics on.
type uncomparableCtx struct {
	context.Context
	tags []string
}

func TestSendContext(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, c *Client, parent context.Context, cancelParent context.CancelFunc)
	}{
		{"ends replyGrace after its parent, with its values", func(t *testing.T, c *Client, parent context.Context, cancelParent context.CancelFunc) {
			sctx, release := c.sendContext(parent)
			defer release()
			if v := sctx.Value(graceKey{}); v != "v" {
				t.Errorf("Value = %v, want the parent's", v)
			}
			if _, ok := sctx.Deadline(); ok {
				t.Error("the context reports a deadline")
			}
			start := time.Now()
			cancelParent()
			<-sctx.Done()
			if took := time.Since(start); took < replyGrace || took > replyGrace+stallSlack {
				t.Errorf("the context ended %v after its parent, want %v", took, replyGrace)
			}
			if !errors.Is(sctx.Err(), context.Canceled) {
				t.Errorf("Err = %v, want context.Canceled", sctx.Err())
			}
		}},
		{"shared by the calls of one parent", func(t *testing.T, c *Client, parent context.Context, _ context.CancelFunc) {
			a, releaseA := c.sendContext(parent)
			b, releaseB := c.sendContext(parent)
			releaseA()
			releaseB()
			if a != b {
				t.Fatal("two calls with one parent got two contexts")
			}
		}},
		{"not shared between Clients", func(t *testing.T, c *Client, parent context.Context, _ context.CancelFunc) {
			a, releaseA := c.sendContext(parent)
			defer releaseA()
			b, releaseB := new(Client).sendContext(parent)
			defer releaseB()
			if a == b {
				t.Fatal("two Clients share a context")
			}
		}},
		{"not shared for an uncomparable context", func(t *testing.T, c *Client, parent context.Context, _ context.CancelFunc) {
			a, releaseA := c.sendContext(uncomparableCtx{parent, []string{"a"}})
			b, releaseB := c.sendContext(uncomparableCtx{parent, []string{"b"}})
			releaseA()
			releaseB()
			if a == b {
				t.Fatal("two calls with uncomparable contexts got one")
			}
		}},
		{"its parent itself once the parent has ended", func(t *testing.T, c *Client, parent context.Context, cancelParent context.CancelFunc) {
			cancelParent()
			sctx, release := c.sendContext(parent)
			defer release()
			if sctx != parent {
				t.Fatal("a call whose context has ended got another")
			}
			if r := c.call(sctx, func(context.Context) rueidis.RedisResult {
				t.Error("a command was sent with a context that had ended")
				return rueidis.RedisResult{}
			}); !errors.Is(r.Error(), context.Canceled) {
				t.Errorf("call = %v, want context.Canceled", r.Error())
			}
		}},
		{"lasts while in use after another parent's call", func(t *testing.T, c *Client, parent context.Context, _ context.CancelFunc) {
			a, releaseA := c.sendContext(parent)
			other, cancelOther := context.WithCancel(context.Background())
			defer cancelOther()
			b, releaseB := c.sendContext(other)
			defer releaseB()
			if a.Err() != nil {
				t.Fatalf("the first context ended (%v) while in use and its parent lives", a.Err())
			}
			releaseA()
			if b != a && a.Err() == nil { // replaced, unused: unregistered from its parent
				t.Error("a context replaced and no longer used did not end")
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			parent, cancel := context.WithCancel(context.WithValue(context.Background(), graceKey{}, "v"))
			defer cancel()
			tc.run(t, new(Client), parent, cancel)
		})
	}
}

// TestSendContextConcurrent has goroutines share and replace the shared
// context of a few parents that live on: none of theirs ends while in use.
func TestSendContextConcurrent(t *testing.T) {
	parents := make([]context.Context, 3)
	for i := range parents {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		parents[i] = ctx
	}
	c := new(Client)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				sctx, release := c.sendContext(parents[(g+i/7)%len(parents)])
				if err := sctx.Err(); err != nil {
					t.Errorf("a context in use ended: %v", err)
				}
				release()
			}
		})
	}
	wg.Wait()
}
