package returns_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

func init() { asynctest.UseStore(store.Open) }

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// TestRestockOncePerOrderOnTheHomeShard cancels orders of a voucher of
// three shards in MySQL and runs their returns twice: each order's unit
// goes back once, into its buyer's home shard, and the buyer's record
// lets go of it.
func TestRestockOncePerOrderOnTheHomeShard(t *testing.T) {
	e := asynctest.New(t)
	ctx := context.Background()
	v := &flashsale.Voucher{Title: "t", Stock: 30, Shards: 3, PaymentWindowSeconds: 600,
		BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := e.Svc.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	orders := e.Buy(v.ID, asynctest.Users(1, 9)...)
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitDrained(v.ID, 9)
	var closed []*flashsale.Order
	for _, o := range orders[:4] {
		c, _, err := e.DB.CancelOrder(ctx, o.ID, o.UserID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		closed = append(closed, c)
	}
	before, err := async.ReadState(ctx, e.Client, e.Prefix, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	r := async.Returns(e.Client, e.Config())
	for range 2 {
		if err := r.Restock(ctx, closed); err != nil {
			t.Fatal(err)
		}
	}
	after, err := async.ReadState(ctx, e.Client, e.Prefix, v.ID)
	if err != nil || after.Stock != before.Stock+4 || after.Held != before.Held-4 {
		t.Fatalf("Redis before %+v, after %+v (%v); want 4 units moved from held to stock, once", before, after, err)
	}
	shards := e.Keys.Shards(v.ID, 3)
	for _, o := range closed {
		home := shards[layout.HomeShard(o.UserID, 3)]
		if err := e.Do(e.Client.B().Hget().Key(home.Buyers).Field(itoa(o.UserID)).Build()).Error(); err == nil {
			t.Errorf("user %d still recorded on its home shard after its return", o.UserID)
		}
		n, err := e.Do(e.Client.B().Hget().Key(home.Returned).Field(itoa(o.ID)).Build()).AsInt64()
		if err != nil || n != 1 {
			t.Errorf("order %d in its home shard's returned hash: %d, %v; want 1 unit", o.ID, n, err)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
