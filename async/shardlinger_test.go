package async_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
)

// TestShardGateLingers: a shard's gate queue that has just run a call
// with one order queued meanwhile waits (Config.ShardLinger, an hour
// here) for as many as the voucher's one queue would have sent, K = 2
// times that, and sends them together; a lone order goes at once. A
// voucher without shards sends the queued order as soon as the call
// before it is answered.
func TestShardGateLingers(t *testing.T) {
	for _, shards := range []int{2, 1} {
		t.Run(map[int]string{1: "no shards", 2: "2 shards"}[shards], func(t *testing.T) {
			e := newEnv(t)
			var v *flashsale.Voucher
			if shards > 1 {
				v = e.shardedVoucher(100, shards)
			} else {
				v = e.Voucher(100)
			}
			p := testenv.StartProxy(t)
			cfg := e.Config()
			cfg.ShardLinger = time.Hour // only orders end a linger here
			svc, err := async.NewService(p.Client(t), e.DB, cfg)
			if err != nil {
				t.Fatal(err)
			}
			home := e.Keys.Shards(v.ID, shards)[0].Gate() // meta, buyers, …
			var users []int64                             // buyers of shard 0
			for u := int64(1); len(users) < 4; u++ {
				if layout.HomeShard(u, shards) == 0 {
					users = append(users, u)
				}
			}
			place := func(u int64) chan error { return placeAsync(svc, v.ID, u) }
			if err := waitAnswer(t, place(users[0])); err != nil { // a lone order: at once
				t.Fatal(err)
			}
			p.FreezeReplies() // the next call runs in Redis; its answer waits
			second := place(users[1])
			waitFor(t, "the second order in Redis", func() bool { return e.hasBuyer(home[1], users[1]) })
			third := place(users[2])
			waitFor(t, "the third order queued", func() bool { return svc.GateQueued(home[0]) == 1 })
			p.Thaw()
			if err := waitAnswer(t, second); err != nil {
				t.Fatal(err)
			}
			if shards == 1 {
				if err := waitAnswer(t, third); err != nil {
					t.Fatal(err)
				}
				return
			}
			select {
			case err := <-third:
				t.Fatalf("the third order, queued during a shard's call, answered %v alone; want it to wait for a fourth", err)
			case <-time.After(200 * time.Millisecond):
			}
			if e.hasBuyer(home[1], users[2]) {
				t.Fatal("the third order was sent alone")
			}
			fourth := place(users[3])
			for _, c := range []chan error{third, fourth} {
				if err := waitAnswer(t, c); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// placeAsync places an order of user in a goroutine; its answer comes on
// the channel.
func placeAsync(svc *async.Service, voucherID, user int64) chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: user})
		errc <- err
	}()
	return errc
}

// hasBuyer reports whether the buyers hash holds user.
func (e *env) hasBuyer(buyers string, user int64) bool {
	n, err := e.Do(e.Client.B().Hexists().Key(buyers).Field(itoa(user)).Build()).AsInt64()
	return err == nil && n == 1
}

// waitAnswer returns an order's answer, failing the test on a hang.
func waitAnswer(t *testing.T, errc chan error) error {
	t.Helper()
	select {
	case err := <-errc:
		return err
	case <-time.After(30 * time.Second): // a bound only on a hang
		t.Fatal("an order was not answered in 30 s")
		return nil
	}
}

// waitFor waits until cond holds, failing the test on a hang.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30 s", what)
		}
	}
}
