package asynctest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/async/reconcile"
)

// Snapshot returns Redis's stock, initial stock and buyer count (summed
// over the voucher's shards).
func (e *Env) Snapshot(voucherID int64) (stock, initial, buyers int64) {
	e.T.Helper()
	ctx := context.Background()
	n, err := layout.ShardCount(ctx, e.Client, e.Keys, voucherID)
	if err != nil {
		e.T.Fatal(err)
	}
	s, err := layout.ReadSnapshot(ctx, e.Client, e.Keys, voucherID, n, layout.CountHeld)
	if err != nil || !s.Loaded {
		e.T.Fatalf("snapshot of voucher %d: %+v %v", voucherID, s, err)
	}
	return int64(s.Stock), int64(s.InitialStock), int64(s.Held)
}

// Do runs a Redis command, failing the test on an error.
func (e *Env) Do(cmd rueidis.Completed) rueidis.RedisResult {
	e.T.Helper()
	r := e.Client.Do(context.Background(), cmd)
	if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
		e.T.Fatalf("Redis: %v", err)
	}
	return r
}

// DeadLetters returns the voucher's dead-letter entries.
func (e *Env) DeadLetters(voucherID int64) []rueidis.XRangeEntry {
	e.T.Helper()
	dead, err := e.Do(e.Client.B().Xrange().Key(e.Keys.Voucher(voucherID).Dead).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		e.T.Fatal(err)
	}
	return dead
}

// Deliver reads up to n new entries of the voucher's stream as consumer
// name, without acknowledging them: a consumer that dies after reading.
func (e *Env) Deliver(voucherID int64, name string, n int64) []rueidis.XRangeEntry {
	e.T.Helper()
	key := e.Keys.Voucher(voucherID).Orders
	res, err := e.Do(e.Client.B().Xreadgroup().Group(layout.DefaultGroup, name).Count(n).Streams().Key(key).Id(">").Build()).AsXRead()
	if err != nil {
		e.T.Fatal(err)
	}
	return res[key]
}

// DeadLetter moves a delivered entry of vk's stream to its dead letters
// with the reason and kind, each of its orders, as a consumer would
// (dead.lua, then its ack).
func (e *Env) DeadLetter(vk layout.VoucherKeys, entry rueidis.XRangeEntry, reason, kind string) {
	e.T.Helper()
	orders, bad := layout.ParseEntry(0, entry.ID, entry.FieldValues)
	if len(bad) > 0 {
		e.T.Fatalf("dead-lettering entry %s: %v", entry.ID, bad[0].Err)
	}
	for _, o := range orders {
		order, user := strconv.FormatInt(o.ID, 10), strconv.FormatInt(o.UserID, 10)
		add := e.Client.B().Xadd().Key(vk.Dead).Id("*").FieldValue().
			FieldValue(layout.FieldOrder, order).FieldValue(layout.FieldUser, user).
			FieldValue(layout.FieldReason, reason).FieldValue("entry", entry.ID).FieldValue("deliveries", "1").
			FieldValue(layout.FieldKind, kind)
		e.Do(add.Build())
		e.Do(e.Client.B().Hset().Key(vk.Failed).FieldValue().FieldValue(user, order).Build())
	}
	ack := layout.AckEntry{ID: entry.ID, Orders: len(orders)}
	if _, err := layout.Ack(context.Background(), e.Client, vk, layout.DefaultGroup, []layout.AckEntry{ack}, nil, false); err != nil {
		e.T.Fatal(err)
	}
}

// CheckSold checks the end state of a drained sale in both stores: Redis
// stock and buyers, and MySQL orders matching the accepted ones exactly.
func (e *Env) CheckSold(v *flashsale.Voucher, accepted []*flashsale.Order) {
	e.T.Helper()
	ctx := context.Background()
	stock, initial, buyers := e.Snapshot(v.ID)
	if stock+buyers != initial || int(buyers) != len(accepted) {
		e.T.Errorf("Redis: stock %d + buyers %d, initial %d; want %d buyers", stock, buyers, initial, len(accepted))
	}
	a, err := e.DB.AuditVoucher(ctx, v.ID)
	if err != nil {
		e.T.Fatal(err)
	}
	want := flashsale.Audit{Stock: v.Stock, Remaining: v.Stock - len(accepted), Orders: len(accepted), Units: len(accepted), DistinctBuyers: len(accepted)}
	if a != want {
		e.T.Errorf("MySQL audit = %+v, want %+v", a, want)
	}
	for _, o := range accepted {
		got, err := e.DB.FindOrder(ctx, o.ID)
		if err != nil {
			e.T.Errorf("accepted order %d: %v", o.ID, err)
			continue
		}
		if got.Status != flashsale.StatusCreated || got.UserID != o.UserID || got.VoucherID != v.ID {
			e.T.Errorf("order %d in MySQL = %+v, accepted as %+v", o.ID, got, o)
		}
	}
}

// Sell has buyers users 1..buyers of the voucher each try attempts times,
// all at once, and returns the orders accepted. A refusal other than
// sold out or a duplicate fails the test, and so does a buyer with two
// orders.
func (e *Env) Sell(voucherID int64, buyers, attempts int) []*flashsale.Order {
	e.T.Helper()
	var (
		mu       sync.Mutex
		accepted []*flashsale.Order
		byUser   = map[int64]int{}
		wg       sync.WaitGroup
		bad      error
	)
	start := make(chan struct{})
	for u := 1; u <= buyers; u++ {
		for range attempts {
			wg.Go(func() {
				<-start
				o, err := e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: voucherID, UserID: int64(u)})
				mu.Lock()
				defer mu.Unlock()
				switch Code(err) {
				case "":
					accepted = append(accepted, o)
					byUser[o.UserID]++
				case flashsale.ESoldOut, flashsale.EDuplicateOrder:
				default:
					bad = err
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if bad != nil {
		e.T.Fatalf("unexpected refusal: %v", bad)
	}
	for u, n := range byUser {
		if n != 1 {
			e.T.Errorf("user %d got %d orders", u, n)
		}
	}
	return accepted
}

// RedisTime returns Redis's clock.
func RedisTime(t testing.TB, c rueidis.Client) time.Time {
	t.Helper()
	ts, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(ts[0], ts[1]*1000)
}

// Kinds returns the differences as sorted "<kind> <user>[ fixed]".
func Kinds(diffs []reconcile.Diff) []string {
	var out []string
	for _, d := range diffs {
		fixed := ""
		if d.Fixed {
			fixed = " fixed"
		}
		out = append(out, string(d.Kind)+" "+strconv.FormatInt(d.UserID, 10)+fixed)
	}
	slices.Sort(out)
	return out
}
