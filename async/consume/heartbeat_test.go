package consume_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
)

// stallingPersister persists into db, but its first call waits, holding
// its batch, until stall is closed.
type stallingPersister struct {
	db      consume.Persister
	stall   chan struct{}
	stalled chan struct{} // closed when the first call starts waiting
	calls   atomic.Int64
}

// PersistOrders implements consume.Persister.
func (p *stallingPersister) PersistOrders(ctx context.Context, orders []flashsale.Order) (flashsale.PersistResult, error) {
	if p.calls.Add(1) == 1 {
		close(p.stalled)
		select {
		case <-p.stall:
		case <-ctx.Done():
			return flashsale.PersistResult{}, ctx.Err()
		}
	}
	return p.db.PersistOrders(ctx, orders)
}

// TestLiveConsumersBatchIsNotTakenOver: a consumer stuck on a batch for
// many heartbeats, but alive, keeps it: another consumer looking for dead
// ones all the while takes nothing (ClaimIdle, the fallback for stuck
// consumers, is out of the way). Released, it persists its batch; every
// order is persisted once.
func TestLiveConsumersBatchIsNotTakenOver(t *testing.T) {
	e := newEnv(t)
	v := e.Voucher(40)
	accepted := e.Buy(v.ID, asynctest.Users(1, 40)...)
	cfg := e.ConsumerConfig()
	cfg.ClaimIdle, cfg.Heartbeat, cfg.BatchSize = time.Hour, 500*time.Millisecond, 10

	stuck := &stallingPersister{db: e.DB, stall: make(chan struct{}), stalled: make(chan struct{})}
	cfg.Name = "stuck"
	a := consume.New(e.Client, stuck, cfg)
	e.Run(a)
	<-stuck.stalled
	held := e.pendingOf(v.ID, "stuck")
	if held != 10 {
		t.Fatalf("the stuck consumer holds %d entries, want its batch of 10", held)
	}

	cfg.Name = "other"
	b := consume.New(e.Client, e.DB, cfg)
	e.Run(b)
	e.WaitFor("the other consumer to persist the rest", 60*time.Second, func() (bool, error) {
		a, err := e.DB.AuditVoucher(context.Background(), v.ID)
		return a.Orders == 40-held, err
	})
	// Ten heartbeat lifetimes in which b looks for dead consumers twice
	// every lifetime (a wait, not a measurement: nothing may happen).
	time.Sleep(10 * cfg.Heartbeat)
	if n := e.pendingOf(v.ID, "stuck"); n != held || b.Stats().Claimed != 0 {
		t.Fatalf("the stuck consumer holds %d of its %d entries, the other claimed %d; want its batch left alone", n, held, b.Stats().Claimed)
	}
	close(stuck.stall)
	e.WaitDrained(v.ID, 40)
	e.CheckSold(v, accepted)
	if sa, sb := a.Stats(), b.Stats(); sa.AlreadyPresent+sb.AlreadyPresent != 0 || sa.Persisted+sb.Persisted != 40 {
		t.Errorf("stats %+v and %+v; want 40 orders persisted once", sa, sb)
	}
}

// TestStoppedConsumersEntriesAreTakenOverAtOnce: a consumer stopped while
// it holds entries deletes its heartbeat, so another takes them over as
// soon as they are idle for a heartbeat's lifetime, without waiting for
// ClaimIdle (out of the way here).
func TestStoppedConsumersEntriesAreTakenOverAtOnce(t *testing.T) {
	e := newEnv(t)
	v := e.Voucher(20)
	accepted := e.Buy(v.ID, asynctest.Users(1, 20)...)
	cfg := e.ConsumerConfig()
	cfg.ClaimIdle, cfg.Heartbeat, cfg.BatchSize = time.Hour, time.Second, 5

	stuck := &stallingPersister{db: e.DB, stall: make(chan struct{}), stalled: make(chan struct{})}
	cfg.Name = "stopped"
	stop := e.Run(consume.New(e.Client, stuck, cfg))
	<-stuck.stalled
	stop() // the stalled attempt ends with the context: its batch stays pending
	if n := e.pendingOf(v.ID, "stopped"); n != 5 {
		t.Fatalf("the stopped consumer holds %d entries, want its batch of 5", n)
	}
	cfg.Name = "next"
	next := consume.New(e.Client, e.DB, cfg)
	e.Run(next)
	e.WaitDrained(v.ID, 20)
	e.CheckSold(v, accepted)
	if s := next.Stats(); s.ClaimedDead != 5 || s.Claimed != 5 {
		t.Errorf("stats %+v; want the stopped consumer's 5 entries taken over by its heartbeat", s)
	}
}
