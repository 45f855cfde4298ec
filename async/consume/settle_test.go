package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// TestRedeliveredBatchEntriesSettleEachOrderOnce: two gate batches'
// entries come back to a consumer after an earlier one died holding them,
// having dead-lettered an order of each and tried one order of the first
// on its own five times (each attempt died), the first entry delivered 10
// times. The orders dead-lettered before are neither persisted nor
// dead-lettered again; the one tried five times is dead-lettered untried
// (poison); the others are persisted; both entries are acknowledged and
// the attempt counts and marks deleted.
func TestRedeliveredBatchEntriesSettleEachOrderOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := e.Voucher(10)
	vk := e.Keys.Voucher(v.ID)
	base := v.ID % 1_000_000 * 1000 // order ids of this test's own
	add := func(orders ...int64) string {
		fv := e.Client.B().Xadd().Key(vk.Orders).Id("*").FieldValue()
		for _, o := range orders {
			fv = fv.FieldValue(itoa(base+o), itoa(o)) // order id -> user, as gate.lua writes a batch
		}
		id, err := e.Do(fv.Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	first, second := add(1, 2, 3), add(4, 5)
	if held := e.Deliver(v.ID, "died", 2); len(held) != 2 {
		t.Fatalf("delivered %d entries, want 2", len(held))
	}
	e.Do(e.Client.B().Xclaim().Key(vk.Orders).Group(async.DefaultGroup).Consumer("died").MinIdleTime("0").
		Id(first).Retrycount(10).Build())
	mark := func(entry string, order int64) string { return entry + "/" + itoa(base+order) }
	e.Do(e.Client.B().Hset().Key(vk.Tries).FieldValue().FieldValue(mark(first, 1), "dead").
		FieldValue(mark(first, 2), "5").FieldValue(mark(second, 4), "dead").Build())

	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitFor("both entries settled", 60*time.Second, func() (bool, error) {
		marks, err := e.Do(e.Client.B().Hlen().Key(vk.Tries).Build()).AsInt64()
		if err != nil {
			return false, err
		}
		sum, err := e.Do(e.Client.B().Xpending().Key(vk.Orders).Group(async.DefaultGroup).Build()).ToArray()
		if err != nil || len(sum) == 0 {
			return false, err
		}
		pending, err := sum[0].AsInt64()
		return marks == 0 && pending == 0, err
	})
	dead := e.DeadLetters(v.ID)
	if len(dead) != 1 || dead[0].FieldValues[layout.FieldOrder] != itoa(base+2) || dead[0].FieldValues[layout.FieldKind] != string(layout.DeadPoison) {
		t.Fatalf("dead letters %v; want order %d alone, poison", dead, base+2)
	}
	for o, want := range map[int64]bool{1: false, 2: false, 3: true, 4: false, 5: true} {
		_, err := e.DB.FindOrder(ctx, base+o)
		if (err == nil) != want {
			t.Errorf("order %d in MySQL: %v; want persisted %v", base+o, err, want)
		}
	}
}
