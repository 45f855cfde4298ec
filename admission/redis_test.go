package admission_test

import (
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/admission"
	"github.com/flashsale/flashsale/internal/testenv"
)

// Polling reads Redis only: with the database closed, tickets still poll,
// through the waiting and the admission.
func TestPollTouchesNoMySQL(t *testing.T) {
	e := newEnv(t, 10, 100, 0)
	tk := e.join(1)
	reads := e.mysqlReads.Load()
	e.db.Close()
	for range 50 {
		if got := e.poll(1, tk.Ticket); got.State != admission.Waiting {
			t.Fatalf("state %q", got.State)
		}
	}
	e.admitUntil(func() bool { return e.poll(1, tk.Ticket).State == admission.Admitted })
	if n := e.mysqlReads.Load(); n != reads {
		t.Fatalf("%d voucher reads while polling", n-reads)
	}
}

// The waiting room on Redis Cluster: every key of a voucher's room in one
// slot, so each script runs there.
func TestOnRedisCluster(t *testing.T) {
	e := newEnv(t, 3, 100, 0)
	client, prefix := testenv.StartCluster(t, testenv.WithoutReplicas()).PrefixedClient(t)
	e.prefix = prefix
	e.q = e.newQueue(client)
	tickets := map[int64]string{}
	for u := int64(1); u <= 5; u++ {
		tickets[u] = e.join(u).Ticket
	}
	e.admitUntil(func() bool { return e.poll(3, tickets[3]).State == admission.Admitted })
	if got := e.poll(4, tickets[4]); got.State != admission.Waiting || got.Position != 1 {
		t.Fatalf("the fourth, with 3 units and 3 passes out: %+v", got)
	}
	orders := admission.Wrap(nil, e.q)
	pass := e.poll(1, tickets[1]).Pass
	_, err := orders.PlaceOrder(e.ctx, flashsale.OrderRequest{VoucherID: e.v.ID, UserID: 2, Pass: pass})
	if flashsale.ErrorCode(err) != flashsale.EPassInvalid {
		t.Fatalf("another's pass: %v", err)
	}
	e.units.Store(0)
	e.admitUntil(func() bool { return e.poll(5, tickets[5]).State == admission.SoldOut })
	if s, err := e.q.Stats(e.ctx, e.v.ID); err != nil || s.Admitted != 3 || s.Waiting != 0 {
		t.Fatalf("stats %+v, %v", s, err)
	}
}
