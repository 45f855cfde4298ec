package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/store"
)

// TestConsumerOfAnotherDatabaseDeadLettersNothing: a consumer whose
// database lacks the voucher (another deployment's, on the same Redis
// prefix) reads its orders, dead-letters none, counts the error and hands
// them back; the deployment's own consumer persists every one.
func TestConsumerOfAnotherDatabaseDeadLettersNothing(t *testing.T) {
	e := newEnv(t)
	_, otherURL := asynctest.MySQLDatabase(t)
	other, err := store.Open(context.Background(), otherURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	v := e.Voucher(100)

	cfg := e.ConsumerConfig()
	cfg.Name, cfg.BatchSize, cfg.ClaimIdle = "wrong", 10, time.Hour // only heartbeats hand entries over
	wrong := consume.New(e.Client, other, cfg)
	e.Run(wrong)
	accepted := e.Buy(v.ID, asynctest.Users(1, 100)...)
	e.WaitFor("the other database's consumer to refuse a batch", 60*time.Second, func() (bool, error) {
		return wrong.Stats().UnknownVoucher > 0, nil
	})
	if dead := e.DeadLetters(v.ID); len(dead) != 0 {
		t.Fatalf("dead letters %v; want none", dead)
	}

	cfg.Name, cfg.BatchSize = "right", 500
	right := consume.New(e.Client, e.DB, cfg)
	e.Run(right)
	e.WaitDrained(v.ID, 100)
	e.CheckSold(v, accepted)
	if dead := e.DeadLetters(v.ID); len(dead) != 0 {
		t.Errorf("dead letters %v; want none", dead)
	}
	if s := wrong.Stats(); s.DeadLettered != 0 || s.Persisted != 0 || s.UnknownVoucher == 0 {
		t.Errorf("the other database's consumer: %+v; want refusals counted, nothing persisted or dead-lettered", s)
	}
	if s := right.Stats(); s.ClaimedDead == 0 || s.Persisted != 100 {
		t.Errorf("the deployment's consumer: %+v; want the handed-back entries taken over and all 100 persisted", s)
	}
	if n := e.pendingOf(v.ID, "wrong"); n != 0 {
		t.Errorf("%d entries still pending on the other database's consumer", n)
	}
}
