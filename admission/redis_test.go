package admission_test

import (
	"net/netip"
	"strconv"
	"sync"
	"testing"

	"github.com/redis/rueidis"

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

// sold_out is final: an instance that read it answers it from memory,
// even once Redis forgot the room (here: its meta deleted, so another
// instance reads the ticket as expired).
func TestSoldOutIsFinalFromMemory(t *testing.T) {
	e := newEnv(t, 1, 100, 0)
	tickets := map[int64]string{}
	for u := int64(1); u <= 3; u++ {
		tickets[u] = e.join(u).Ticket
	}
	e.admitUntil(func() bool { return e.poll(1, tickets[1]).State == admission.Admitted })
	e.units.Store(0)
	e.admitUntil(func() bool { return e.poll(3, tickets[3]).State == admission.SoldOut })
	meta := e.prefix + "{q" + strconv.FormatInt(e.v.ID, 10) + "}:m"
	if err := e.client.Do(e.ctx, e.client.B().Del().Key(meta).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if got, err := e.newQueue(e.client).Poll(e.ctx, e.v.ID, 3, tickets[3]); err != nil || got.State != admission.Expired {
		t.Fatalf("another instance, without the room's meta: %+v, %v", got, err)
	}
	if got := e.poll(3, tickets[3]); got.State != admission.SoldOut || got.Position != 0 || got.Pass != "" {
		t.Fatalf("the instance that read sold_out: %+v", got)
	}
}

// Joins arriving together go in one batch: each buyer, joining twice at
// once, gets one ticket, and the buyers hold the places 1..n.
func TestConcurrentJoinsBatched(t *testing.T) {
	const users = 300
	e := newEnv(t, 10, 100, 0)
	var mu sync.Mutex
	got := map[int64][]*admission.Ticket{}
	var wg sync.WaitGroup
	for u := int64(1); u <= users; u++ {
		for range 2 {
			wg.Go(func() {
				tk := e.join(u)
				mu.Lock()
				got[u] = append(got[u], tk)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	places := map[int64]bool{}
	for u, tks := range got {
		if tks[0].Ticket != tks[1].Ticket {
			t.Fatalf("user %d joined twice at once: two tickets", u)
		}
		places[e.poll(u, tks[0].Ticket).Position] = true
	}
	for p := int64(1); p <= users; p++ {
		if !places[p] {
			t.Fatalf("no buyer holds place %d", p)
		}
	}
}

// With Redis unreachable, the deny list cannot be known: requests answer
// unavailable (not allowed through, not denied), many at once.
func TestDenyListRedisDown(t *testing.T) {
	e := newEnv(t, 10, 100, 0)
	down, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	q := e.newQueue(down)
	var wg sync.WaitGroup
	for u := range 20 {
		wg.Go(func() {
			denied, err := q.Denied(e.ctx, int64(u+1), netip.MustParseAddr("192.0.2.1"))
			if denied || flashsale.ErrorCode(err) != flashsale.EUnavailable {
				t.Errorf("denied %v, err %v; want unavailable", denied, err)
			}
		})
	}
	wg.Wait()
}
