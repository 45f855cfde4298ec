package consume_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/store"
)

func TestStockShortOrdersAreDeadLettered(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(10)
	accepted := e.Buy(v.ID, asynctest.Users(1, 10)...)
	// MySQL has 3 units fewer than Redis sold.
	if err := e.DB.SetRemaining(ctx, v.ID, 7); err != nil {
		t.Fatal(err)
	}
	c := consume.New(e.Client, e.DB, e.ConsumerConfig())
	e.Run(c)
	e.WaitDrained(v.ID, 7)

	dead := e.DeadLetters(v.ID)
	if len(dead) != 3 || c.Stats().DeadLettered != 3 {
		t.Fatalf("%d dead letters (stats %+v), want 3", len(dead), c.Stats())
	}
	for _, d := range dead {
		if !strings.Contains(d.FieldValues[layout.FieldReason], "stock short") {
			t.Errorf("dead letter %v: want reason stock short", d.FieldValues)
		}
		if d.FieldValues[layout.FieldKind] != string(layout.DeadStockShort) {
			t.Errorf("dead letter %v: want kind %s", d.FieldValues, layout.DeadStockShort)
		}
	}
	var created, failed int
	for _, o := range accepted {
		found, err := e.Svc.FindOrder(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		switch found.Status {
		case flashsale.StatusCreated:
			created++
		case flashsale.StatusFailed:
			failed++
		}
	}
	if created != 7 || failed != 3 {
		t.Errorf("FindOrder: %d created, %d failed; want 7 and 3", created, failed)
	}
	// Reconciliation reports them but gives no unit back to Redis: MySQL
	// has none, so a buyer accepted for it would fail the same way.
	r := e.Reconciler()
	rep, err := r.Repair(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	// (MySQL's stock, set by hand above, is reported too.)
	got := slices.DeleteFunc(asynctest.Kinds(rep.Diffs), func(k string) bool { return !strings.HasPrefix(k, "dead_letter") })
	if len(got) != 3 || slices.ContainsFunc(got, func(k string) bool { return strings.HasSuffix(k, "fixed") }) {
		t.Errorf("reconcile --fix = %v; want 3 dead letters reported, none given back", asynctest.Kinds(rep.Diffs))
	}
	stock, err := e.Do(e.Client.B().Hget().Key(e.Keys.Voucher(v.ID).Meta).Field("stock").Build()).AsInt64()
	if err != nil || stock != 0 {
		t.Errorf("Redis stock after reconcile --fix = %d, %v; want 0", stock, err)
	}
}

func TestConflictingOrderIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(10)
	o := e.Buy(v.ID, 7)[0]
	// Another order of the same user reached MySQL some other way.
	other := &flashsale.Order{ID: o.ID + 1, VoucherID: v.ID, UserID: 7}
	if err := e.DB.InsertOrder(ctx, other, 1); err != nil {
		t.Fatal(err)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitFor("the dead letter", 30*time.Second, func() (bool, error) {
		return len(e.DeadLetters(v.ID)) == 1, nil
	})
	d := e.DeadLetters(v.ID)[0].FieldValues
	if d[layout.FieldOrder] != itoa(o.ID) || d[layout.FieldUser] != "7" || !strings.Contains(d[layout.FieldReason], "conflict") {
		t.Errorf("dead letter = %v; want order %d of user 7, conflict", d, o.ID)
	}
	if d[layout.FieldKind] != string(layout.DeadConflict) {
		t.Errorf("dead letter = %v; want kind %s", d, layout.DeadConflict)
	}
}

func TestMalformedEntryIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	v := e.Voucher(10)
	vk := e.Keys.Voucher(v.ID)
	e.Do(e.Client.B().Xadd().Key(vk.Orders).Id("*").FieldValue().FieldValue(layout.FieldOrder, "x").FieldValue(layout.FieldUser, "1").Build())
	good := e.Buy(v.ID, 2)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 1)
	dead := e.DeadLetters(v.ID)
	if len(dead) != 1 || !strings.Contains(dead[0].FieldValues[layout.FieldReason], "malformed") {
		t.Fatalf("dead letters = %v; want the malformed entry", dead)
	}
	if _, err := e.DB.FindOrder(context.Background(), good[0].ID); err != nil {
		t.Errorf("the good order after the malformed one: %v", err)
	}
}

func TestRedeliveredEntriesAreNotDuplicated(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(50)
	accepted := e.Buy(v.ID, asynctest.Users(1, 50)...)
	// A consumer read 20 entries, persisted them and died before
	// acknowledging.
	held := e.Deliver(v.ID, "died", 20)
	var orders []flashsale.Order
	for _, en := range held {
		o, err := consume.ParseOrders(v.ID, en)
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, o...)
	}
	if _, err := e.DB.PersistOrders(ctx, orders); err != nil {
		t.Fatal(err)
	}
	c := consume.New(e.Client, e.DB, e.ConsumerConfig())
	e.Run(c)
	e.WaitDrained(v.ID, 50)
	e.CheckSold(v, accepted)
	if s := c.Stats(); s.Claimed != 20 || s.AlreadyPresent != 20 || s.Persisted != 30 {
		t.Errorf("stats = %+v; want 20 claimed and already present, 30 persisted", s)
	}
}

func TestOverDeliveredEntriesAreTriedAloneThenDeadLettered(t *testing.T) {
	e := newEnv(t)
	v := e.Voucher(10)
	accepted := e.Buy(v.ID, 1, 2, 3)
	held := e.Deliver(v.ID, "died", 3)
	// Consumers that took these over died, or MySQL was down while they
	// restarted: the first two entries have been delivered 10 times, past
	// MaxDeliveries (5), so the next take-over persists them on their
	// own. The second had been tried on its own 5 times already, and each
	// attempt died: it is dead-lettered untried. The first is persisted.
	vk := e.Keys.Voucher(v.ID)
	for _, h := range held[:2] {
		e.Do(e.Client.B().Xclaim().Key(vk.Orders).Group(async.DefaultGroup).Consumer("died").MinIdleTime("0").
			Id(h.ID).Retrycount(10).Build())
	}
	tries := held[1].ID + "/" + itoa(accepted[1].ID) // attempts are counted per order
	e.Do(e.Client.B().Hset().Key(vk.Tries).FieldValue().FieldValue(tries, "5").Build())
	c := consume.New(e.Client, e.DB, e.ConsumerConfig())
	e.Run(c)
	e.WaitDrained(v.ID, 2)
	dead := e.DeadLetters(v.ID)
	want := "delivered 11 times; 5 attempts to persist it on its own did not finish"
	if len(dead) != 1 || dead[0].FieldValues[layout.FieldOrder] != itoa(accepted[1].ID) || dead[0].FieldValues[layout.FieldReason] != want {
		t.Fatalf("dead letters = %v; want order %d: %s", dead, accepted[1].ID, want)
	}
	for _, o := range []*flashsale.Order{accepted[0], accepted[2]} {
		if got, err := e.DB.FindOrder(context.Background(), o.ID); err != nil || got.Status != flashsale.StatusCreated {
			t.Errorf("order %d: %+v, %v; want it persisted", o.ID, got, err)
		}
	}
	if n, err := e.Do(e.Client.B().Hlen().Key(vk.Tries).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("%d attempt counts left behind, %v; want none", n, err)
	}
}

// TestStoppedAttemptOnItsOwnDoesNotCount: an over-delivered entry tried
// on its own while MySQL is unreachable, and a consumer stopped in the
// middle of it, does not count an attempt against the entry: only an
// attempt its process died in does.
func TestStoppedAttemptOnItsOwnDoesNotCount(t *testing.T) {
	e := newEnv(t)
	v := e.Voucher(10)
	bought := e.Buy(v.ID, 1)
	held := e.Deliver(v.ID, "died", 1)
	vk := e.Keys.Voucher(v.ID)
	tries := held[0].ID + "/" + itoa(bought[0].ID) // attempts are counted per order
	e.Do(e.Client.B().Xclaim().Key(vk.Orders).Group(async.DefaultGroup).Consumer("died").MinIdleTime("0").
		Id(held[0].ID).Retrycount(10).Build())
	down, err := store.Open(context.Background(), e.URL) // closed at once: every write fails
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	stop := e.Run(consume.New(e.Client, down, e.ConsumerConfig()))
	e.WaitFor("the attempt on its own", 10*time.Second, func() (bool, error) {
		n, err := e.Do(e.Client.B().Hget().Key(vk.Tries).Field(tries).Build()).AsInt64()
		return n == 1, ignoreNil(err)
	})
	stop()
	n, err := e.Do(e.Client.B().Hget().Key(vk.Tries).Field(tries).Build()).AsInt64()
	if ignoreNil(err) != nil || n != 0 {
		t.Fatalf("attempts counted after a stop: %d, %v; want 0", n, err)
	}
	if dead := e.DeadLetters(v.ID); len(dead) != 0 {
		t.Fatalf("dead letters %v; want none", dead)
	}
}

func ignoreNil(err error) error {
	if rueidis.IsRedisNil(err) {
		return nil
	}
	return err
}

func TestConsumerFinishesItsOwnPendingEntriesFirst(t *testing.T) {
	e := newEnv(t)
	v := e.Voucher(10)
	accepted := e.Buy(v.ID, asynctest.Users(1, 10)...)
	e.Deliver(v.ID, "worker-1", 10)
	cfg := e.ConsumerConfig()
	cfg.Name = "worker-1"
	cfg.ClaimIdle = time.Hour // no take-over: the consumer must find them itself
	c := consume.New(e.Client, e.DB, cfg)
	e.Run(c)
	e.WaitDrained(v.ID, 10)
	e.CheckSold(v, accepted)
	if s := c.Stats(); s.Persisted != 10 || s.Claimed != 0 {
		t.Errorf("stats = %+v; want 10 persisted, none claimed", s)
	}
}

func TestBacklogCountsUnpersistedEntries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.Voucher(20), e.Voucher(20)
	e.Buy(a.ID, asynctest.Users(1, 12)...)
	e.Buy(b.ID, asynctest.Users(1, 8)...)
	e.Deliver(a.ID, "slow", 5) // pending counts as well
	if n, err := e.Svc.Backlog(ctx); err != nil || n != 20 {
		t.Fatalf("Backlog = %d, %v; want 20", n, err)
	}
	c := consume.New(e.Client, e.DB, e.ConsumerConfig())
	e.Run(c)
	e.WaitDrained(a.ID, 12)
	e.WaitDrained(b.ID, 8)
	if n, err := c.Backlog(ctx); err != nil || n != 0 {
		t.Errorf("Backlog after draining = %d, %v; want 0", n, err)
	}
}

func TestStreamIsTrimmedAsOrdersArePersisted(t *testing.T) {
	const rounds, perRound = 20, 250
	e := newEnv(t)
	v := e.Voucher(rounds * perRound)
	vk := e.Keys.Voucher(v.ID)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	for r := range rounds {
		first := int64(r*perRound + 1)
		e.Buy(v.ID, asynctest.Users(first, first+perRound-1)...)
		e.WaitDrained(v.ID, (r+1)*perRound)
		// Everything is acknowledged: only the last delivered entry stays.
		if n, err := e.Do(e.Client.B().Xlen().Key(vk.Orders).Build()).AsInt64(); err != nil || n > 1 {
			t.Fatalf("round %d: stream length %d, %v; want at most 1", r, n, err)
		}
	}
}

func TestEntriesAnotherGroupNeedsAreNotTrimmed(t *testing.T) {
	e := newEnv(t)
	v := e.Voucher(200)
	vk := e.Keys.Voucher(v.ID)
	e.Do(e.Client.B().XgroupCreate().Key(vk.Orders).Group("audit").Id("0").Build())
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	xlen := func() int64 {
		n, err := e.Do(e.Client.B().Xlen().Key(vk.Orders).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	e.Buy(v.ID, asynctest.Users(1, 100)...)
	e.WaitDrained(v.ID, 100)
	if n := xlen(); n != 100 {
		t.Fatalf("stream length %d after persisting, want 100: group audit has read nothing", n)
	}
	// audit reads 40 and acknowledges the first 30: 10 stay pending.
	res, err := e.Do(e.Client.B().Xreadgroup().Group("audit", "a").Count(40).Streams().Key(vk.Orders).Id(">").Build()).AsXRead()
	if err != nil {
		t.Fatal(err)
	}
	read := res[vk.Orders]
	var acked []string
	for _, en := range read[:30] {
		acked = append(acked, en.ID)
	}
	e.Do(e.Client.B().Xack().Key(vk.Orders).Group("audit").Id(acked...).Build())

	e.Buy(v.ID, asynctest.Users(101, 200)...)
	e.WaitDrained(v.ID, 200)
	if n := xlen(); n != 170 {
		t.Errorf("stream length %d, want 170: trimmed up to audit's oldest pending entry", n)
	}
	for _, en := range read[30:] {
		got, err := e.Do(e.Client.B().Xrange().Key(vk.Orders).Start(en.ID).End(en.ID).Build()).AsXRange()
		if err != nil || len(got) != 1 {
			t.Errorf("pending entry %s of group audit was trimmed: %v %v", en.ID, got, err)
		}
	}
}

func TestVoucherIsRetiredWhenSoldAndPersisted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := asynctest.RedisTime(t, e.Client)
	// Two seconds: the first order of the voucher's slot may wait up to
	// one for its id range (a new idgen hash).
	v := e.Voucher(10, now.Add(-time.Minute), now.Add(2*time.Second))
	accepted := e.Buy(v.ID, asynctest.Users(1, 5)...)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 5)
	e.WaitFor("the voucher to leave the registry", 30*time.Second, func() (bool, error) {
		member, err := e.Client.Do(ctx, e.Client.B().Sismember().Key(e.Keys.Registry()).Member(itoa(v.ID)).Build()).AsBool()
		return !member, err
	})
	e.CheckSold(v, accepted)
}

func TestConsumerWaitsForAStreamRegisteredBeforeItExists(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id, err := e.IDs.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := &flashsale.Voucher{ID: id, Title: "late", Stock: 5, BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := e.DB.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	e.Do(e.Client.B().Sadd().Key(e.Keys.Registry()).Member(itoa(id)).Build())
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	time.Sleep(300 * time.Millisecond) // the worker meets the missing stream
	accepted := e.Buy(v.ID, 1, 2)      // reloads the voucher, creating its stream
	e.WaitDrained(v.ID, 2)
	e.CheckSold(v, accepted)
}

// TestBatchPersistedAfterARedisLossRecordsItsBuyers: Redis loses a
// voucher's keys while a consumer holds a batch of its orders, and the
// voucher is reloaded from MySQL before the batch reaches MySQL. When the
// batch lands, its buyers are recorded in Redis and take their units, so
// they cannot buy again, and the units are not sold twice: by the
// worker's first ack, and by a lean one (after an earlier ack told the
// worker the voucher's limit is 1), whose entries turn out not pending.
func TestBatchPersistedAfterARedisLossRecordsItsBuyers(t *testing.T) {
	for _, warm := range []bool{false, true} {
		t.Run(fmt.Sprintf("lean=%v", warm), func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			v := e.Voucher(10)
			vk := e.Keys.Voucher(v.ID)
			w := consume.NewWorker(consume.New(e.Client, e.DB, e.ConsumerConfig()), v.ID, vk)
			sold := 0
			if warm {
				e.Buy(v.ID, 9)
				if err := w.Handle(ctx, e.Deliver(v.ID, "c", 1)); err != nil {
					t.Fatal(err)
				}
				sold = 1
			}
			e.Buy(v.ID, asynctest.Users(1, 4)...)
			entries := e.Deliver(v.ID, "c", 4)
			e.Do(e.Client.B().Del().Key(vk.Meta, vk.Buyers, vk.Orders).Build())
			if err := e.Svc.Reload(ctx, v.ID); err != nil {
				t.Fatal(err)
			}
			if err := w.Handle(ctx, entries); err != nil {
				t.Fatal(err)
			}
			if stock, initial, buyers := e.Snapshot(v.ID); stock != int64(6-sold) || initial != 10 || buyers != int64(4+sold) {
				t.Fatalf("Redis after the batch landed: stock %d, initial %d, buyers %d; want %d, 10, %d", stock, initial, buyers, 6-sold, 4+sold)
			}
			if _, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 1}); asynctest.Code(err) != flashsale.EDuplicateOrder {
				t.Fatalf("user 1, whose order is in MySQL, ordering again = %v; want a duplicate order", err)
			}
		})
	}
}
