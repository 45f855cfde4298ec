package auth

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

// TestClicksTogetherCheckedOnce: a buyer's clicks that arrive together
// with a token not cached yet check it once (one signature, one buyer),
// and all get the buyer; a click whose request ends while it waits gets
// the buyer error; the next new token is checked again, and a refused
// token refuses every click, each counted.
func TestClicksTogetherCheckedOnce(t *testing.T) {
	k := testKeys()
	p := newTestProvider(t, k["rs"])
	gated := &gatedStore{BuyerStore: testBuyerStore(t), open: make(chan struct{})}
	a := providerAuth(t, p, gated)
	tok := mustSign(t, k["rs"], claims(p, "clicker"))
	const clicks = 5
	ids := make([]int64, clicks)
	var wg sync.WaitGroup
	for c := range clicks {
		wg.Go(func() {
			var err error
			if ids[c], err = a.User(tok); err != nil {
				t.Errorf("click %d: %v", c, err)
			}
		})
	}
	// The first click numbers the buyer (held by the store); the others
	// wait for its check.
	f := waitForWaiters(t, a, tok, clicks-1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.UserContext(ctx, tok); flashsale.ErrorCode(err) != flashsale.EUnavailable || f.waiting.Load() != clicks-1 {
		t.Fatalf("a click whose request ended while waiting: %v; want unavailable (the buyer error)", err)
	}
	close(gated.open)
	wg.Wait()
	for c := range clicks {
		if ids[c] != ids[0] || ids[c] <= BuyerBase {
			t.Fatalf("clicks' buyers %v; want one, above BuyerBase", ids)
		}
	}
	if s := a.Stats(); s.ProviderTokens != 1 || gated.calls.Load() != 1 {
		t.Fatalf("%d clicks together: %d tokens checked, %d store calls; want 1 and 1", clicks, s.ProviderTokens, gated.calls.Load())
	}
	// Another token of the buyer is checked (the cache answers for the
	// first); a refused one refuses every click.
	again, c := claims(p, "clicker"), claims(p, "clicker")
	again["jti"] = "again" // not the first token, signed in the same second
	c["exp"] = time.Now().Add(-time.Minute).Unix()
	expired := mustSign(t, k["rs"], c)
	for _, tok := range []string{mustSign(t, k["rs"], again), expired, expired} {
		if _, err := a.User(tok); err != nil && tok != expired {
			t.Fatalf("another token: %v", err)
		}
	}
	if s := a.Stats(); s.ProviderTokens != 4 || s.Refused["expired"] != 2 {
		t.Fatalf("after: %d tokens checked, %d refused as expired; want 4 and 2", s.ProviderTokens, s.Refused["expired"])
	}
}

// waitForWaiters waits until n callers wait for the check of tok, and
// returns that check.
func waitForWaiters(t *testing.T, a *Authenticator, tok string, n int32) *verification {
	t.Helper()
	k := keyOf(tok)
	s := a.verifying.shard(k)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		f := s.m[k]
		s.mu.Unlock()
		if f != nil && f.waiting.Load() == n {
			return f
		}
	}
	t.Fatalf("%d callers never waited for one check", n)
	return nil
}

// TestOnceAfterEnded: a check whose caller's request ended answers no
// waiter with that: each checks for itself.
func TestOnceAfterEnded(t *testing.T) {
	var v verifications
	k := keyOf("token")
	started, release := make(chan struct{}), make(chan struct{})
	go v.once(context.Background(), k, func() (grant, error) {
		close(started)
		<-release
		return grant{}, context.Canceled
	})
	<-started
	got := make(chan error, 1)
	go func() {
		_, err := v.once(context.Background(), k, func() (grant, error) { return grant{user: 7}, nil })
		got <- err
	}()
	s := v.shard(k)
	for waiting := int32(0); waiting != 1; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		waiting = s.m[k].waiting.Load()
		s.mu.Unlock()
	}
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("a waiter after the first caller's request ended: %v; want its own check's answer", err)
	}
	if g, err := v.once(context.Background(), k, func() (grant, error) { return grant{}, errors.New("x") }); err == nil || g.user != 0 {
		t.Fatalf("once after: %v, %v; want the new check's error", g, err)
	}
}
