package async_test

import (
	"slices"
	"testing"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/internal/asynctest"
)

// TestConsumers lists the consumers that read a voucher's orders, over
// its shards, once each; a voucher not in Redis has none.
func TestConsumers(t *testing.T) {
	e := newEnv(t)
	v := e.shardedVoucher(40, 2)
	e.Buy(v.ID, asynctest.Users(1, 40)...)
	for _, name := range []string{"b", "a", "b"} {
		e.Deliver(v.ID, name, 1) // shard 0's stream
	}
	// Shard 1's stream, made if no buyer's home was there.
	shard1 := e.Keys.Shards(v.ID, 2)[1].Orders
	_ = e.Client.Do(t.Context(), e.Client.B().XgroupCreate().Key(shard1).Group(async.DefaultGroup).Id("0").Mkstream().Build())
	err := e.Client.Do(t.Context(), e.Client.B().Xreadgroup().Group(async.DefaultGroup, "c").Count(1).Streams().
		Key(shard1).Id(">").Build()).Error()
	if err != nil && !rueidis.IsRedisNil(err) { // nil: nothing to read; c joined all the same
		t.Fatal(err)
	}
	got, err := async.Consumers(t.Context(), e.Client, e.Prefix, "", v.ID)
	if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Consumers = %v, %v; want a, b, c", got, err)
	}
	got, err = async.Consumers(t.Context(), e.Client, e.Prefix, "", v.ID+1)
	if err != nil || len(got) != 0 {
		t.Errorf("Consumers of a voucher not in Redis = %v, %v; want none", got, err)
	}
}
