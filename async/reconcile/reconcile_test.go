package reconcile_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
)

func TestReconcileReportsAndRepairsCraftedDifferences(t *testing.T) {
	e := asynctest.New(t)
	ctx := context.Background()
	v := e.Voucher(20)
	vk := e.Keys.Voucher(v.ID)
	r := e.Reconciler()

	persisted := e.Buy(v.ID, asynctest.Users(1, 10)...)
	stop := e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 10)
	stop()
	if rep, err := r.Check(ctx, v.ID); err != nil || len(rep.Diffs) != 0 || rep.Buyers != 10 || rep.Orders != 10 {
		t.Fatalf("before crafting: %+v, %v; want no differences", rep, err)
	}

	// User 1's order is deleted from MySQL (and its unit given back there).
	if _, err := e.SQL.Exec("DELETE FROM orders WHERE id = ?", persisted[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SQL.Exec("UPDATE vouchers SET remaining = remaining + 1 WHERE id = ?", v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.SQL.Exec("UPDATE buyer_units SET units = units - 1 WHERE voucher_id = ? AND user_id = 1", v.ID); err != nil {
		t.Fatal(err)
	}
	// User 11's order is dead-lettered by a consumer.
	buyDeadLettered(e, v.ID, 11, "crafted", string(layout.DeadConflict))
	// User 12's entry is lost from the stream before anyone read it.
	lost := e.Buy(v.ID, 12)[0]
	unread, err := e.Do(e.Client.B().Xrange().Key(vk.Orders).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	e.Do(e.Client.B().Xdel().Key(vk.Orders).Id(unread[len(unread)-1].ID).Build())
	// User 13's order is waiting in the stream: in flight, no difference.
	waiting := e.Buy(v.ID, 13)

	rep, err := r.Check(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	// User 12's lost entry is still counted in the backlog (the gate
	// counted it, no ack took it out): the count is one order off.
	want := []string{"backlog_count 0", "dead_letter 11", "lost_order 1", "lost_order 12"}
	if got := asynctest.Kinds(rep.Diffs); !slices.Equal(got, want) || rep.InFlight != 1 || rep.DeadLetters != 1 {
		t.Fatalf("report = %v, in flight %d, dead letters %d; want %v, 1, 1", got, rep.InFlight, rep.DeadLetters, want)
	}

	rep, err = r.Repair(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Both re-queued orders count again, user 12's twice: the recount
	// after the requeues corrects it.
	want = []string{"backlog_count 0 fixed", "dead_letter 11 fixed", "lost_order 1 fixed", "lost_order 12 fixed"}
	if got := asynctest.Kinds(rep.Diffs); !slices.Equal(got, want) {
		t.Fatalf("fix = %v; want %v", got, want)
	}
	// User 11 got the unit back and may buy again.
	again := e.Buy(v.ID, 11)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 13)
	rep, err = r.Check(ctx, v.ID)
	if err != nil || len(rep.Diffs) != 0 {
		t.Fatalf("after the repair and the drain: %+v, %v; want no differences", rep, err)
	}
	e.CheckSold(v, slices.Concat(persisted, []*flashsale.Order{lost}, waiting, again))
}

func TestReconcileReportsWhatItLeavesAlone(t *testing.T) {
	e := asynctest.New(t)
	ctx := context.Background()
	v := e.Voucher(10)
	vk := e.Keys.Voucher(v.ID)
	r := e.Reconciler()
	accepted := e.Buy(v.ID, 1, 2)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 2)

	// Redis records another order id for user 1 than MySQL holds.
	e.Do(e.Client.B().Hset().Key(vk.Buyers).FieldValue().FieldValue("1", itoa(accepted[0].ID+7)).Build())
	// MySQL has an order for user 3, whom Redis never accepted.
	if err := e.DB.InsertOrder(ctx, &flashsale.Order{ID: accepted[1].ID + 100, VoucherID: v.ID, UserID: 3}, 1); err != nil {
		t.Fatal(err)
	}
	// A voucher created in MySQL only.
	id, err := e.IDs.NextID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cold := &flashsale.Voucher{ID: id, Title: "cold", Stock: 5, BeginTime: v.BeginTime, EndTime: v.EndTime}
	if err := e.DB.CreateVoucher(ctx, cold); err != nil {
		t.Fatal(err)
	}

	reports, err := r.RepairAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rep := range reports {
		got = append(got, asynctest.Kinds(rep.Diffs)...)
	}
	slices.Sort(got)
	// The order of user 3 is an order nobody took stock for in MySQL
	// either: remaining was not decremented.
	want := []string{"mysql_stock 0", "not_loaded 0", "order_mismatch 1 fixed", "unknown_order 3"}
	if !slices.Equal(got, want) {
		t.Fatalf("reports = %v; want %v", got, want)
	}
	record, err := e.Do(e.Client.B().Hget().Key(vk.Buyers).Field("1").Build()).ToString()
	if _, order := layout.ParseBuyer(record); err != nil || order != itoa(accepted[0].ID) {
		t.Errorf("buyer 1 after the repair records order %q, %v; want MySQL's %d", order, err, accepted[0].ID)
	}
	for _, rep := range reports {
		for _, d := range rep.Diffs {
			if d.Detail == "" || !strings.Contains(string(d.Kind), "_") {
				t.Errorf("difference without detail: %+v", d)
			}
		}
	}
}

// TestReconcileRegistersAVoucherWithUnreadOrders: orders waiting in the
// stream of a voucher missing from the registry (a re-queue cut short
// between its append and its registration) are a difference, repaired by
// registering the voucher, after which a consumer persists them.
func TestReconcileRegistersAVoucherWithUnreadOrders(t *testing.T) {
	e := asynctest.New(t)
	ctx := context.Background()
	v := e.Voucher(10)
	r := e.Reconciler()
	waiting := e.Buy(v.ID, 1, 2)
	e.Do(e.Client.B().Srem().Key(e.Keys.Registry()).Member(itoa(v.ID)).Build())

	rep, err := r.Check(ctx, v.ID)
	if got, want := asynctest.Kinds(rep.Diffs), []string{"unregistered 0"}; err != nil || !slices.Equal(got, want) || rep.InFlight != 2 {
		t.Fatalf("report = %v, in flight %d, %v; want %v, 2", got, rep.InFlight, err, want)
	}
	rep, err = r.Repair(ctx, v.ID)
	if got, want := asynctest.Kinds(rep.Diffs), []string{"unregistered 0 fixed"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("fix = %v, %v; want %v", got, err, want)
	}
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 2)
	if rep, err := r.Check(ctx, v.ID); err != nil || len(rep.Diffs) != 0 {
		t.Fatalf("after the repair and the drain: %v, %v; want no differences", asynctest.Kinds(rep.Diffs), err)
	}
	e.CheckSold(v, waiting)
}

// TestReconcileDecidesDeadLettersByKind: whether a dead-lettered unit is
// given back is decided on the entry's kind alone, never on its text
// reason: a stock_short one is not, any other is.
func TestReconcileDecidesDeadLettersByKind(t *testing.T) {
	e := asynctest.New(t)
	v := e.Voucher(10)
	stockShortText := "store: stock short: voucher " + itoa(v.ID) + " has 0 left, the batch needs 1"
	// user → dead.lua's reason and kind
	letters := []struct {
		user         int64
		reason, kind string
		givenBack    bool
	}{
		{1, stockShortText, string(layout.DeadStockShort), false},
		{2, "conflict: another order", string(layout.DeadKeyConflict), true},
		{3, "reason text says nothing", string(layout.DeadStockShort), false},
		{4, stockShortText, string(layout.DeadConflict), true}, // the kind wins over the text
	}
	for _, l := range letters {
		buyDeadLettered(e, v.ID, l.user, l.reason, l.kind)
	}
	dead := e.DeadLetters(v.ID)
	if len(dead) != 4 || dead[1].FieldValues[layout.FieldKind] != string(layout.DeadKeyConflict) || dead[2].FieldValues[layout.FieldKind] != string(layout.DeadStockShort) {
		t.Fatalf("dead letters = %v; want 4, the second %s, the third %s", dead, layout.DeadKeyConflict, layout.DeadStockShort)
	}
	rep, err := e.Reconciler().Repair(context.Background(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range letters {
		if l.givenBack {
			want = append(want, "dead_letter "+itoa(l.user)+" fixed")
		} else {
			want = append(want, "dead_letter "+itoa(l.user))
		}
	}
	slices.Sort(want)
	if got := asynctest.Kinds(rep.Diffs); !slices.Equal(got, want) {
		t.Fatalf("repair = %v; want %v", got, want)
	}
	stock, err := e.Do(e.Client.B().Hget().Key(e.Keys.Voucher(v.ID).Meta).Field("stock").Build()).AsInt64()
	if err != nil || stock != 10-4+2 {
		t.Errorf("Redis stock after the repair = %d, %v; want %d (two units given back)", stock, err, 10-4+2)
	}
}
