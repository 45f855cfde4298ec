package layout

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/internal/testenv"
)

// fillStream appends n orders to vk's stream the way gate.lua does, with
// the group load.lua creates at 0, and a meta hash whose sale is open.
func fillStream(t testing.TB, c rueidis.Client, vk VoucherKeys, n int) {
	t.Helper()
	ctx := context.Background()
	end := strconv.FormatInt(time.Now().Add(time.Hour).UnixMicro(), 10)
	cmds := rueidis.Commands{
		c.B().Hset().Key(vk.Meta).FieldValue().FieldValue("stock", "1").FieldValue("end", end).Build(),
		c.B().XgroupCreate().Key(vk.Orders).Group(DefaultGroup).Id("0").Mkstream().Build(),
	}
	for i := range n {
		cmds = append(cmds, c.B().Xadd().Key(vk.Orders).Id("*").FieldValue().
			FieldValue(FieldOrder, strconv.Itoa(i+1)).FieldValue(FieldUser, strconv.Itoa(i+1)).Build())
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// readAndAck reads n entries for a consumer and acknowledges the first
// acked of them with Ack (which trims), leaving the rest pending.
func readAndAck(t testing.TB, c rueidis.Client, vk VoucherKeys, n, acked int) {
	t.Helper()
	ctx := context.Background()
	res, err := c.Do(ctx, c.B().Xreadgroup().Group(DefaultGroup, "c1").Count(int64(n)).Streams().Key(vk.Orders).Id(">").Build()).AsXRead()
	if err != nil {
		t.Fatal(err)
	}
	entries := res[vk.Orders]
	if len(entries) != n {
		t.Fatalf("read %d entries, want %d", len(entries), n)
	}
	ids := make([]AckEntry, acked)
	for i := range ids {
		ids[i] = AckEntry{ID: entries[i].ID, Orders: 1}
	}
	if _, err := Ack(ctx, c, vk, DefaultGroup, ids, nil, false); err != nil {
		t.Fatal(err)
	}
}

// commandsRun returns the commands run (calls by name) on c's private
// server while run ran, but for this test's own and the client's
// (keepalive, a new connection).
func commandsRun(t testing.TB, c rueidis.Client, run func()) map[string]int {
	t.Helper()
	if err := c.Do(context.Background(), c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	run()
	n := testenv.CommandCalls(t, c)
	for _, own := range []string{"config", "info", "ping", "hello", "client"} {
		delete(n, own)
	}
	return n
}

// TestBacklogCostDoesNotGrow builds a backlog of 100,000 orders with no
// consumer reading (the outage case: the group has read nothing), then one
// a consumer read part of and acknowledged part of, and checks that the
// backlog is counted right and that counting it runs the same commands,
// as many, whatever the backlog's size: no XRANGE over the entries (issue
// 34: every sampler tick and /readyz scanned the whole backlog).
func TestBacklogCostDoesNotGrow(t *testing.T) {
	srv := testenv.StartRedis(t) // a private server: its commandstats are ours alone
	c := srv.Client(t)
	ctx := context.Background()
	k := New("b:")
	small, large := k.Voucher(1), k.Voucher(2)
	fillStream(t, c, small, 1_000)
	fillStream(t, c, large, 100_000)

	calls := func(vk VoucherKeys, want int64) map[string]int {
		t.Helper()
		if _, _, _, err := StreamBacklog(ctx, c, vk, DefaultGroup); err != nil { // loads the script
			t.Fatal(err)
		}
		return commandsRun(t, c, func() {
			for range 10 {
				got, _, ended, err := StreamBacklog(ctx, c, vk, DefaultGroup)
				if err != nil || got != want || ended {
					t.Fatalf("StreamBacklog of %s = %d, %v, %v; want %d, false", vk.Body, got, ended, err, want)
				}
			}
		})
	}
	same := func(what string, a, b map[string]int) {
		t.Helper()
		if a["xrange"] != 0 || b["xrange"] != 0 {
			t.Errorf("%s: the count scanned the stream: %v and %v", what, a, b)
		}
		if len(a) != len(b) {
			t.Errorf("%s: a backlog of 1,000 ran %v, one of 100,000 %v", what, a, b)
		}
		for cmd, n := range a {
			if b[cmd] != n {
				t.Errorf("%s: a backlog of 1,000 ran %v, one of 100,000 %v", what, a, b)
				break
			}
		}
	}
	same("nothing read", calls(small, 1_000), calls(large, 100_000))

	// A consumer reads 600, acknowledges 400 (trimmed) and holds 200.
	readAndAck(t, c, small, 600, 400)
	readAndAck(t, c, large, 600, 400)
	same("part read", calls(small, 600), calls(large, 99_600))

	total, err := Backlog(ctx, c, k, DefaultGroup)
	if err != nil || total != 0 {
		t.Fatalf("Backlog with no voucher registered = %d, %v", total, err)
	}
	if err := c.Do(ctx, c.B().Sadd().Key(k.Registry()).Member("1", "2").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if total, err = Backlog(ctx, c, k, DefaultGroup); err != nil || total != 600+99_600 {
		t.Fatalf("Backlog = %d, %v; want %d", total, err, 600+99_600)
	}
}

// TestBacklogAfterAnXDEL: an entry deleted with XDEL makes Redis's lag
// unknown; the count is still right (what follows the last delivered
// entry is counted), before and after the group read some of the stream.
func TestBacklogAfterAnXDEL(t *testing.T) {
	c := testenv.StartRedis(t).Client(t)
	ctx := context.Background()
	vk := New("x:").Voucher(1)
	fillStream(t, c, vk, 10)
	all, err := c.Do(ctx, c.B().Xrange().Key(vk.Orders).Start("-").End("+").Build()).AsXRange()
	if err != nil || len(all) != 10 {
		t.Fatalf("stream %d entries, %v", len(all), err)
	}
	if err := c.Do(ctx, c.B().Xdel().Key(vk.Orders).Id(all[7].ID).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, entries, _, err := StreamBacklog(ctx, c, vk, DefaultGroup); err != nil || entries != 9 {
		t.Fatalf("after an XDEL: %d entries, %v; want 9", entries, err)
	}
	readAndAck(t, c, vk, 5, 3) // 2 pending, 4 not delivered (one of 5 deleted)
	if _, entries, _, err := StreamBacklog(ctx, c, vk, DefaultGroup); err != nil || entries != 6 {
		t.Fatalf("after reading 5 and acknowledging 3: %d entries, %v; want 6", entries, err)
	}
}
