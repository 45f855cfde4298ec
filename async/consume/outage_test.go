package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/internal/testenv"
)

func TestMySQLOutageLosesAndDoublesNothing(t *testing.T) {
	const (
		stock  = 500
		before = 200 // sold and persisted before the outage
		outage = 10 * time.Second
	)
	mariadb := testenv.StartMariaDB(t)
	client, prefix := testenv.Redis(t)
	e := &env{asynctest.NewOn(t, client, prefix, mariadb.DSN(), mariadb.URL())}
	ctx := context.Background()
	v := e.Voucher(stock)

	// Two consumers; ClaimIdle is well below the outage, so each would
	// take over the other's batch (a delivery each time) if they did not
	// keep touching the batches they retry.
	cfg := e.ConsumerConfig()
	cfg.ClaimIdle = 3 * time.Second
	cfg.PersistTimeout = time.Second
	consumers := []*consume.Consumer{consume.New(e.Client, e.DB, cfg), consume.New(e.Client, e.DB, cfg)}
	for _, c := range consumers {
		e.Run(c)
	}
	accepted := e.Buy(v.ID, asynctest.Users(1, before)...)
	e.WaitDrained(v.ID, before)

	mariadb.Stop()
	start := time.Now()
	accepted = append(accepted, e.Buy(v.ID, asynctest.Users(before+1, stock)...)...)
	var backlog int64
	for time.Since(start) < outage {
		n, err := e.Svc.Backlog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		backlog = max(backlog, n)
		time.Sleep(200 * time.Millisecond)
	}
	if backlog != stock-before {
		t.Errorf("largest backlog during the outage %d, want the %d orders accepted meanwhile", backlog, stock-before)
	}
	if dead := e.DeadLetters(v.ID); len(dead) != 0 {
		t.Fatalf("dead letters during the outage: %v", dead)
	}
	mariadb.Start()

	e.WaitDrained(v.ID, stock)
	e.CheckSold(v, accepted)
	if dead := e.DeadLetters(v.ID); len(dead) != 0 {
		t.Errorf("dead letters after the outage: %v", dead)
	}
	var retries, claimed uint64
	for _, c := range consumers {
		retries += c.Stats().Retries
		claimed += c.Stats().Claimed
	}
	if retries == 0 {
		t.Error("no consumer retried a batch: the outage was not noticed")
	}
	t.Logf("retries %d, entries taken over %d", retries, claimed)
}
