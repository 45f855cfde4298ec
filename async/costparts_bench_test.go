package async_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/internal/layout"
	"github.com/flashsale/flashsale/internal/testenv"
)

// The parts of an accepted order's Redis cost, each measured alone on a
// private redis-server (INFO cpu before and after), to say what each
// remaining µs of BenchmarkRedisCostPerOrder buys (issue 34). A gate call
// here is a batch of costPartsBatch new buyers, the batch size of the
// 256-client run.
const costPartsBatch = 125

// costPartScripts are scripts with gate.lua's arguments (a batch of
// one-unit orders without keys: 2 per order after 3) doing one part of
// its work each.
var costPartScripts = map[string]string{
	// floor: the arguments in and one reply value per order out.
	"floor": `local out = {0, 1, 2, 3, 4, 5, 6, 7, ''}
for i = 1, (#ARGV - 3) / 2 do out[9 + i] = 0 end
return out`,
	// hsetnx: the floor and the buyer's HSETNX, one redis.call per order.
	"hsetnx": `local out = {0, 1, 2, 3, 4, 5, 6, 7, ''}
for i = 1, (#ARGV - 3) / 2 do
  local a = 2 * i + 2
  redis.call('HSETNX', KEYS[2], ARGV[a], ARGV[a + 1])
  out[9 + i] = 0
end
return out`,
	// xadd: the floor and one stream entry per order.
	"xadd-per-order": `local out = {0, 1, 2, 3, 4, 5, 6, 7, ''}
for i = 1, (#ARGV - 3) / 2 do
  local a = 2 * i + 2
  out[9 + i] = redis.call('XADD', KEYS[3], '*', 'o', ARGV[a + 1], 'u', ARGV[a])
end
return out`,
	// xadd-per-batch: the floor and one stream entry for the whole batch.
	"xadd-per-batch": `local out, f = {0, 1, 2, 3, 4, 5, 6, 7, ''}, {}
for i = 1, (#ARGV - 3) / 2 do
  local a = 2 * i + 2
  f[#f + 1], f[#f + 2] = ARGV[a + 1], ARGV[a]
  out[9 + i] = 0
end
out[9] = redis.call('XADD', KEYS[3], '*', unpack(f))
return out`,
}

// BenchmarkRedisCostParts reports Redis's CPU per order of gate.lua itself
// and of the parts above, and of a consumer's XREADGROUP and XACK+XTRIM of
// entries of one order (what the pipeline writes) or of a whole batch.
//
//	go test -run '^$' -bench RedisCostParts -benchtime 400x ./async/
func BenchmarkRedisCostParts(b *testing.B) {
	gate, err := os.ReadFile("gate.lua")
	if err != nil {
		b.Fatal(err)
	}
	scripts := map[string]string{"gate.lua": string(gate)}
	for k, v := range costPartScripts {
		scripts[k] = v
	}
	c := testenv.StartRedis(b).Client(b)
	for _, name := range []string{"floor", "hsetnx", "xadd-per-order", "xadd-per-batch", "gate.lua"} {
		b.Run("script="+name, func(b *testing.B) { gateCostPart(b, c, scripts[name], costPartsBatch) })
	}
	for _, per := range []int{1, costPartsBatch} {
		b.Run("consume/orders-per-entry="+strconv.Itoa(per), func(b *testing.B) { consumeCostPart(b, c, per) })
	}
	b.Run("consume/ack.lua", func(b *testing.B) { ackCostPart(b, c, false) })
	b.Run("consume/ack.lua-lean", func(b *testing.B) { ackCostPart(b, c, true) })
}

// ackCostPart runs ack.lua, as a consumer does after each transaction, on
// b.N reads of one pending entry of a batch of new buyers whom Redis
// records (the normal case), with the entries' orders or lean (a voucher
// whose limit is 1), and reports Redis's CPU per order.
func ackCostPart(b *testing.B, c rueidis.Client, lean bool) {
	ctx := context.Background()
	mustDo(b, c, c.B().Flushall().Build())
	vk := layout.New("").Voucher(7)
	mustDo(b, c, c.B().Hset().Key(vk.Meta).FieldValue().FieldValue("stock", "1").FieldValue("queued", "0").Build())
	mustDo(b, c, c.B().XgroupCreate().Key(vk.Orders).Group(layout.DefaultGroup).Id("$").Mkstream().Build())
	acks := make([][]layout.AckEntry, b.N)
	orders := make([][]flashsale.Order, b.N)
	user := 0
	for i := range b.N {
		fv := c.B().Xadd().Key(vk.Orders).Id("*").FieldValue()
		buyers := c.B().Hset().Key(vk.Buyers).FieldValue()
		for range costPartsBatch {
			user++
			o := flashsale.Order{ID: 1_786_000_000_000_000_000 + int64(user), UserID: 1_000_000 + int64(user), Quantity: 1}
			fv = fv.FieldValue(strconv.FormatInt(o.ID, 10), strconv.FormatInt(o.UserID, 10))
			buyers = buyers.FieldValue(strconv.FormatInt(o.UserID, 10), "1:"+strconv.FormatInt(o.ID, 10))
			orders[i] = append(orders[i], o)
		}
		id, err := c.Do(ctx, fv.Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		mustDo(b, c, buyers.Build())
		acks[i] = []layout.AckEntry{{ID: id, Orders: costPartsBatch, Persisted: orders[i]}}
	}
	mustDo(b, c, c.B().Xreadgroup().Group(layout.DefaultGroup, "c").Streams().Key(vk.Orders).Id(">").Build())
	if _, err := layout.Ack(ctx, c, vk, layout.DefaultGroup, nil, nil, false); err != nil { // loads the script
		b.Fatal(err)
	}
	before := readRedisCost(b, c)
	b.ResetTimer()
	for i := range b.N {
		if _, err := layout.Ack(ctx, c, vk, layout.DefaultGroup, acks[i], nil, lean); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	d := readRedisCost(b, c).since(before)
	b.ReportMetric(float64(d.cpu.Nanoseconds())/1e3/float64(b.N*costPartsBatch), "redis-µs/order")
}

// gateCostPart runs script b.N times on a batch of orders new buyers
// with gate.lua's keys and arguments, and reports Redis's CPU per order
// and per call.
func gateCostPart(b *testing.B, c rueidis.Client, script string, orders int) {
	ctx := context.Background()
	s := rueidis.NewLuaScript(script)
	mustDo(b, c, c.B().Flushall().Build())
	mustDo(b, c, c.B().Hset().Key("{v}m").FieldValue().FieldValue("stock", "1000000000").FieldValue("initial", "1000000000").
		FieldValue("begin", "0").FieldValue("end", "99999999999999999").Build())
	keys := []string{"{v}m", "{v}b", "{v}s", "{v}k", "{v}p"}
	user := 0
	batch := func() []string {
		args := []string{"7", "600000", "2"}
		for range orders {
			user++
			args = append(args, strconv.Itoa(1_000_000+user), strconv.Itoa(1_786_000_000_000_000_000+user))
		}
		return args
	}
	calls := make([][]string, b.N)
	for i := range calls {
		calls[i] = batch()
	}
	if err := s.Exec(ctx, c, keys, batch()).Error(); err != nil { // loads the script
		b.Fatal(err)
	}
	before := readRedisCost(b, c)
	b.ResetTimer()
	for _, args := range calls {
		if err := s.Exec(ctx, c, keys, args).Error(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	d := readRedisCost(b, c).since(before)
	b.ReportMetric(float64(d.cpu.Nanoseconds())/1e3/float64(b.N*orders), "redis-µs/order")
	b.ReportMetric(float64(d.cpu.Nanoseconds())/1e3/float64(b.N), "redis-µs/call")
}

// BenchmarkGateCallSize reports Redis's CPU per gate.lua call and per
// order for calls of 1 to 125 new buyers, one call at a time on a private
// redis-server: a call's fixed part (a round trip, which costs Redis
// about 20 µs of CPU on these machines, and the script's preamble and
// writes once per batch) against what each order adds. It is what a
// shard of a voucher of K shards pays when its calls carry 1/K of the
// orders (BenchmarkServeShards, docs/benchmarks.md).
//
//	go test -run '^$' -bench GateCallSize -benchtime 3000x ./async/
func BenchmarkGateCallSize(b *testing.B) {
	gate, err := os.ReadFile("gate.lua")
	if err != nil {
		b.Fatal(err)
	}
	c := testenv.StartRedis(b).Client(b)
	for _, n := range []int{1, 4, 8, 16, 32, costPartsBatch} {
		b.Run("orders="+strconv.Itoa(n), func(b *testing.B) { gateCostPart(b, c, string(gate), n) })
	}
}

// consumeCostPart adds b.N batches of orders as entries of per orders,
// reads them with XREADGROUP about 500 orders at a time, then
// acknowledges and trims each read, and reports Redis's CPU per order of
// the reads and of the acks.
func consumeCostPart(b *testing.B, c rueidis.Client, per int) {
	mustDo(b, c, c.B().Flushall().Build())
	mustDo(b, c, c.B().XgroupCreate().Key("{v}s").Group("g").Id("$").Mkstream().Build())
	user := 0
	for range b.N * costPartsBatch / per {
		fv := c.B().Xadd().Key("{v}s").Id("*").FieldValue()
		for range per {
			user++
			o, u := strconv.Itoa(1_786_000_000_000_000_000+user), strconv.Itoa(1_000_000+user)
			if per == 1 {
				fv = fv.FieldValue("o", o).FieldValue("u", u)
			} else {
				fv = fv.FieldValue(o, u)
			}
		}
		mustDo(b, c, fv.Build())
	}
	orders := float64(b.N * costPartsBatch / per * per)
	b.ResetTimer()
	before := readRedisCost(b, c)
	var reads [][]string
	for {
		cmd := c.B().Xreadgroup().Group("g", "c").Count(int64(max(1, 500/per))).Streams().Key("{v}s").Id(">").Build()
		r, err := c.Do(context.Background(), cmd).AsXRead()
		if err != nil && !rueidis.IsRedisNil(err) {
			b.Fatal(err)
		}
		if len(r["{v}s"]) == 0 {
			break
		}
		ids := make([]string, len(r["{v}s"]))
		for i, e := range r["{v}s"] {
			ids[i] = e.ID
		}
		reads = append(reads, ids)
	}
	read := readRedisCost(b, c)
	for _, ids := range reads {
		mustDo(b, c, c.B().Xack().Key("{v}s").Group("g").Id(ids...).Build())
		mustDo(b, c, c.B().Xtrim().Key("{v}s").Minid().Threshold(ids[len(ids)-1]).Build())
	}
	b.StopTimer()
	acked := readRedisCost(b, c)
	b.ReportMetric(float64(read.since(before).cpu.Nanoseconds())/1e3/orders, "read-µs/order")
	b.ReportMetric(float64(acked.since(read).cpu.Nanoseconds())/1e3/orders, "ack-µs/order")
}

// mustDo runs cmd and fails b on an error.
func mustDo(b *testing.B, c rueidis.Client, cmd rueidis.Completed) {
	b.Helper()
	if err := c.Do(context.Background(), cmd).Error(); err != nil {
		b.Fatal(err)
	}
}
