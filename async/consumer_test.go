package async

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/store"
	"github.com/redis/rueidis"
)

func TestStockShortOrdersAreDeadLettered(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.voucher(10)
	accepted := e.buy(v.ID, users(1, 10)...)
	// MySQL has 3 units fewer than Redis sold.
	if err := e.db.SetRemaining(ctx, v.ID, 7); err != nil {
		t.Fatal(err)
	}
	c := NewConsumer(e.client, e.db, e.consumerConfig())
	e.run(c)
	e.waitDrained(v.ID, 7)

	dead := e.deadLetters(v.ID)
	if len(dead) != 3 || c.Stats().DeadLettered != 3 {
		t.Fatalf("%d dead letters (stats %+v), want 3", len(dead), c.Stats())
	}
	for _, d := range dead {
		if !strings.Contains(d.FieldValues[fieldReason], "stock short") {
			t.Errorf("dead letter %v: want reason stock short", d.FieldValues)
		}
		if d.FieldValues[fieldKind] != string(DeadStockShort) {
			t.Errorf("dead letter %v: want kind %s", d.FieldValues, DeadStockShort)
		}
	}
	var created, failed int
	for _, o := range accepted {
		found, err := e.svc.FindOrder(ctx, o.ID)
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
	r := e.reconciler()
	rep, err := r.Repair(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	// (MySQL's stock, set by hand above, is reported too.)
	got := slices.DeleteFunc(kinds(rep.Diffs), func(k string) bool { return !strings.HasPrefix(k, "dead_letter") })
	if len(got) != 3 || slices.ContainsFunc(got, func(k string) bool { return strings.HasSuffix(k, "fixed") }) {
		t.Errorf("reconcile --fix = %v; want 3 dead letters reported, none given back", kinds(rep.Diffs))
	}
	stock, err := e.do(e.client.B().Hget().Key(e.svc.keys.voucher(v.ID).meta).Field("stock").Build()).AsInt64()
	if err != nil || stock != 0 {
		t.Errorf("Redis stock after reconcile --fix = %d, %v; want 0", stock, err)
	}
}

func TestConflictingOrderIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.voucher(10)
	o := e.buy(v.ID, 7)[0]
	// Another order of the same user reached MySQL some other way.
	other := &flashsale.Order{ID: o.ID + 1, VoucherID: v.ID, UserID: 7}
	if err := e.db.InsertOrder(ctx, other); err != nil {
		t.Fatal(err)
	}
	e.run(NewConsumer(e.client, e.db, e.consumerConfig()))
	e.waitFor("the dead letter", 30*time.Second, func() (bool, error) {
		return len(e.deadLetters(v.ID)) == 1, nil
	})
	d := e.deadLetters(v.ID)[0].FieldValues
	if d[fieldOrder] != itoa(o.ID) || d[fieldUser] != "7" || !strings.Contains(d[fieldReason], "conflict") {
		t.Errorf("dead letter = %v; want order %d of user 7, conflict", d, o.ID)
	}
	if d[fieldKind] != string(DeadConflict) {
		t.Errorf("dead letter = %v; want kind %s", d, DeadConflict)
	}
}

func TestMalformedEntryIsDeadLettered(t *testing.T) {
	e := newEnv(t)
	v := e.voucher(10)
	vk := e.svc.keys.voucher(v.ID)
	e.do(e.client.B().Xadd().Key(vk.orders).Id("*").FieldValue().FieldValue(fieldOrder, "x").FieldValue(fieldUser, "1").Build())
	good := e.buy(v.ID, 2)
	e.run(NewConsumer(e.client, e.db, e.consumerConfig()))
	e.waitDrained(v.ID, 1)
	dead := e.deadLetters(v.ID)
	if len(dead) != 1 || !strings.Contains(dead[0].FieldValues[fieldReason], "malformed") {
		t.Fatalf("dead letters = %v; want the malformed entry", dead)
	}
	if _, err := e.db.FindOrder(context.Background(), good[0].ID); err != nil {
		t.Errorf("the good order after the malformed one: %v", err)
	}
}

func TestRedeliveredEntriesAreNotDuplicated(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.voucher(50)
	accepted := e.buy(v.ID, users(1, 50)...)
	// A consumer read 20 entries, persisted them and died before
	// acknowledging.
	held := e.deliver(v.ID, "died", 20)
	var orders []flashsale.Order
	for _, en := range held {
		o, err := parseOrder(v.ID, en)
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, o)
	}
	if _, err := e.db.PersistOrders(ctx, orders); err != nil {
		t.Fatal(err)
	}
	c := NewConsumer(e.client, e.db, e.consumerConfig())
	e.run(c)
	e.waitDrained(v.ID, 50)
	e.checkSold(v, accepted)
	if s := c.Stats(); s.Claimed != 20 || s.AlreadyPresent != 20 || s.Persisted != 30 {
		t.Errorf("stats = %+v; want 20 claimed and already present, 30 persisted", s)
	}
}

func TestOverDeliveredEntriesAreTriedAloneThenDeadLettered(t *testing.T) {
	e := newEnv(t)
	v := e.voucher(10)
	accepted := e.buy(v.ID, 1, 2, 3)
	held := e.deliver(v.ID, "died", 3)
	// Consumers that took these over died, or MySQL was down while they
	// restarted: the first two entries have been delivered 10 times, past
	// MaxDeliveries (5), so the next take-over persists them on their
	// own. The second had been tried on its own 5 times already, and each
	// attempt died: it is dead-lettered untried. The first is persisted.
	vk := e.svc.keys.voucher(v.ID)
	for _, h := range held[:2] {
		e.do(e.client.B().Xclaim().Key(vk.orders).Group(DefaultGroup).Consumer("died").MinIdleTime("0").
			Id(h.ID).Retrycount(10).Build())
	}
	e.do(e.client.B().Hset().Key(vk.tries).FieldValue().FieldValue(held[1].ID, "5").Build())
	c := NewConsumer(e.client, e.db, e.consumerConfig())
	e.run(c)
	e.waitDrained(v.ID, 2)
	dead := e.deadLetters(v.ID)
	want := "delivered 11 times; 5 attempts to persist it on its own did not finish"
	if len(dead) != 1 || dead[0].FieldValues[fieldOrder] != itoa(accepted[1].ID) || dead[0].FieldValues[fieldReason] != want {
		t.Fatalf("dead letters = %v; want order %d: %s", dead, accepted[1].ID, want)
	}
	for _, o := range []*flashsale.Order{accepted[0], accepted[2]} {
		if got, err := e.db.FindOrder(context.Background(), o.ID); err != nil || got.Status != flashsale.StatusCreated {
			t.Errorf("order %d: %+v, %v; want it persisted", o.ID, got, err)
		}
	}
	if n, err := e.do(e.client.B().Hlen().Key(vk.tries).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("%d attempt counts left behind, %v; want none", n, err)
	}
}

// TestStoppedAttemptOnItsOwnDoesNotCount: an over-delivered entry tried
// on its own while MySQL is unreachable, and a consumer stopped in the
// middle of it, does not count an attempt against the entry: only an
// attempt its process died in does.
func TestStoppedAttemptOnItsOwnDoesNotCount(t *testing.T) {
	e := newEnv(t)
	v := e.voucher(10)
	e.buy(v.ID, 1)
	held := e.deliver(v.ID, "died", 1)
	vk := e.svc.keys.voucher(v.ID)
	e.do(e.client.B().Xclaim().Key(vk.orders).Group(DefaultGroup).Consumer("died").MinIdleTime("0").
		Id(held[0].ID).Retrycount(10).Build())
	down, err := store.Open(context.Background(), e.url) // closed at once: every write fails
	if err != nil {
		t.Fatal(err)
	}
	down.Close()
	stop := e.run(NewConsumer(e.client, down, e.consumerConfig()))
	e.waitFor("the attempt on its own", 10*time.Second, func() (bool, error) {
		n, err := e.do(e.client.B().Hget().Key(vk.tries).Field(held[0].ID).Build()).AsInt64()
		return n == 1, ignoreNil(err)
	})
	stop()
	n, err := e.do(e.client.B().Hget().Key(vk.tries).Field(held[0].ID).Build()).AsInt64()
	if ignoreNil(err) != nil || n != 0 {
		t.Fatalf("attempts counted after a stop: %d, %v; want 0", n, err)
	}
	if dead := e.deadLetters(v.ID); len(dead) != 0 {
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
	v := e.voucher(10)
	accepted := e.buy(v.ID, users(1, 10)...)
	e.deliver(v.ID, "worker-1", 10)
	cfg := e.consumerConfig()
	cfg.Name = "worker-1"
	cfg.ClaimIdle = time.Hour // no take-over: the consumer must find them itself
	c := NewConsumer(e.client, e.db, cfg)
	e.run(c)
	e.waitDrained(v.ID, 10)
	e.checkSold(v, accepted)
	if s := c.Stats(); s.Persisted != 10 || s.Claimed != 0 {
		t.Errorf("stats = %+v; want 10 persisted, none claimed", s)
	}
}

func TestBacklogCountsUnpersistedEntries(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, b := e.voucher(20), e.voucher(20)
	e.buy(a.ID, users(1, 12)...)
	e.buy(b.ID, users(1, 8)...)
	e.deliver(a.ID, "slow", 5) // pending counts as well
	if n, err := e.svc.Backlog(ctx); err != nil || n != 20 {
		t.Fatalf("Backlog = %d, %v; want 20", n, err)
	}
	c := NewConsumer(e.client, e.db, e.consumerConfig())
	e.run(c)
	e.waitDrained(a.ID, 12)
	e.waitDrained(b.ID, 8)
	if n, err := c.Backlog(ctx); err != nil || n != 0 {
		t.Errorf("Backlog after draining = %d, %v; want 0", n, err)
	}
}

func TestStreamIsTrimmedAsOrdersArePersisted(t *testing.T) {
	const rounds, perRound = 20, 250
	e := newEnv(t)
	v := e.voucher(rounds * perRound)
	vk := e.svc.keys.voucher(v.ID)
	e.run(NewConsumer(e.client, e.db, e.consumerConfig()))
	for r := range rounds {
		first := int64(r*perRound + 1)
		e.buy(v.ID, users(first, first+perRound-1)...)
		e.waitDrained(v.ID, (r+1)*perRound)
		// Everything is acknowledged: only the last delivered entry stays.
		if n, err := e.do(e.client.B().Xlen().Key(vk.orders).Build()).AsInt64(); err != nil || n > 1 {
			t.Fatalf("round %d: stream length %d, %v; want at most 1", r, n, err)
		}
	}
}

func TestEntriesAnotherGroupNeedsAreNotTrimmed(t *testing.T) {
	e := newEnv(t)
	v := e.voucher(200)
	vk := e.svc.keys.voucher(v.ID)
	e.do(e.client.B().XgroupCreate().Key(vk.orders).Group("audit").Id("0").Build())
	e.run(NewConsumer(e.client, e.db, e.consumerConfig()))
	xlen := func() int64 {
		n, err := e.do(e.client.B().Xlen().Key(vk.orders).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	e.buy(v.ID, users(1, 100)...)
	e.waitDrained(v.ID, 100)
	if n := xlen(); n != 100 {
		t.Fatalf("stream length %d after persisting, want 100: group audit has read nothing", n)
	}
	// audit reads 40 and acknowledges the first 30: 10 stay pending.
	res, err := e.do(e.client.B().Xreadgroup().Group("audit", "a").Count(40).Streams().Key(vk.orders).Id(">").Build()).AsXRead()
	if err != nil {
		t.Fatal(err)
	}
	read := res[vk.orders]
	var acked []string
	for _, en := range read[:30] {
		acked = append(acked, en.ID)
	}
	e.do(e.client.B().Xack().Key(vk.orders).Group("audit").Id(acked...).Build())

	e.buy(v.ID, users(101, 200)...)
	e.waitDrained(v.ID, 200)
	if n := xlen(); n != 170 {
		t.Errorf("stream length %d, want 170: trimmed up to audit's oldest pending entry", n)
	}
	for _, en := range read[30:] {
		got, err := e.do(e.client.B().Xrange().Key(vk.orders).Start(en.ID).End(en.ID).Build()).AsXRange()
		if err != nil || len(got) != 1 {
			t.Errorf("pending entry %s of group audit was trimmed: %v %v", en.ID, got, err)
		}
	}
}

func TestVoucherIsRetiredWhenSoldAndPersisted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	now := redisTime(t, e.client)
	v := e.voucher(10, now.Add(-time.Minute), now.Add(time.Second))
	accepted := e.buy(v.ID, users(1, 5)...)
	e.run(NewConsumer(e.client, e.db, e.consumerConfig()))
	e.waitDrained(v.ID, 5)
	e.waitFor("the voucher to leave the registry", 30*time.Second, func() (bool, error) {
		member, err := e.client.Do(ctx, e.client.B().Sismember().Key(e.svc.keys.registry()).Member(itoa(v.ID)).Build()).AsBool()
		return !member, err
	})
	e.checkSold(v, accepted)
}

func TestConsumerWaitsForAStreamRegisteredBeforeItExists(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	id, err := e.ids.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v := &flashsale.Voucher{ID: id, Title: "late", Stock: 5, BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := e.db.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	e.do(e.client.B().Sadd().Key(e.svc.keys.registry()).Member(itoa(id)).Build())
	e.run(NewConsumer(e.client, e.db, e.consumerConfig()))
	time.Sleep(300 * time.Millisecond) // the worker meets the missing stream
	accepted := e.buy(v.ID, 1, 2)      // reloads the voucher, creating its stream
	e.waitDrained(v.ID, 2)
	e.checkSold(v, accepted)
}

// TestBatchPersistedAfterARedisLossRecordsItsBuyers: Redis loses a
// voucher's keys while a consumer holds a batch of its orders, and the
// voucher is reloaded from MySQL before the batch reaches MySQL. When the
// batch lands, its buyers are recorded in Redis and take their units, so
// they cannot buy again, and the units are not sold twice.
func TestBatchPersistedAfterARedisLossRecordsItsBuyers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.voucher(10)
	e.buy(v.ID, users(1, 4)...)
	entries := e.deliver(v.ID, "c", 4)
	vk := e.svc.keys.voucher(v.ID)
	e.do(e.client.B().Del().Key(vk.meta, vk.buyers, vk.orders).Build())
	if err := e.svc.Reload(ctx, v.ID); err != nil {
		t.Fatal(err)
	}

	w := &worker{c: NewConsumer(e.client, e.db, e.consumerConfig()), voucher: v.ID, keys: vk, log: e.log}
	if err := w.handle(ctx, entries, nil); err != nil {
		t.Fatal(err)
	}
	if stock, initial, buyers := e.snapshot(v.ID); stock != 6 || initial != 10 || buyers != 4 {
		t.Fatalf("Redis after the batch landed: stock %d, initial %d, buyers %d; want 6, 10, 4", stock, initial, buyers)
	}
	if _, err := e.svc.PlaceOrder(ctx, v.ID, 1); code(err) != flashsale.EDuplicateOrder {
		t.Fatalf("user 1, whose order is in MySQL, ordering again = %v; want a duplicate order", err)
	}
}
