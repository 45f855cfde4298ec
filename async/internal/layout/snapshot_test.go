package layout

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/internal/testenv"
)

// fillBuyers writes vk's meta hash for a limit per buyer and n buyers
// holding units units each ("<units>:<order>", as gate.lua writes them
// above a limit of 1).
func fillBuyers(t testing.TB, c rueidis.Client, vk VoucherKeys, limit, n, units int) {
	t.Helper()
	cmds := rueidis.Commands{c.B().Hset().Key(vk.Meta).FieldValue().FieldValue("stock", "7").FieldValue("initial", strconv.Itoa(7+n*units)).
		FieldValue("limit", strconv.Itoa(limit)).FieldValue("orders", strconv.Itoa(n)).Build()}
	for i := 0; i < n; i += 1000 {
		hset := c.B().Hset().Key(vk.Buyers).FieldValue()
		for u := i; u < min(i+1000, n); u++ {
			hset = hset.FieldValue(strconv.Itoa(u+1), strconv.Itoa(units)+":"+strconv.Itoa(u+1))
		}
		cmds = append(cmds, hset.Build())
	}
	for _, r := range c.DoMulti(context.Background(), cmds...) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestQuickSnapshotDoesNotReadBuyers: with a limit per buyer above 1, the
// snapshot every periodic reader and GET of a voucher takes (QuickHeld)
// runs the same commands, as many, for 100 buyers as for 50,000, and
// never reads them all (HVALS: ~50 ms of Redis per read at 100k buyers,
// every 2 s from the sampler and every 100 ms from the waiting room's
// admission, before issue 34's review); CountHeld, for audits, still
// sums them. With a limit of 1 both count the buyers (HLEN).
func TestQuickSnapshotDoesNotReadBuyers(t *testing.T) {
	srv := testenv.StartRedis(t) // a private server: its commandstats are ours alone
	c := srv.Client(t)
	ctx := context.Background()
	k := New("s:")
	small, large, one := k.Voucher(1), k.Voucher(2), k.Voucher(3)
	fillBuyers(t, c, small, 3, 100, 2)
	fillBuyers(t, c, large, 3, 50_000, 2)
	fillBuyers(t, c, one, 1, 500, 1)

	read := func(vk VoucherKeys, held HeldMode) (Snapshot, map[string]int) {
		t.Helper()
		if _, err := ReadSnapshots(ctx, c, []VoucherKeys{vk}, held); err != nil { // loads the script
			t.Fatal(err)
		}
		var s []Snapshot
		n := commandsRun(t, c, func() {
			var err error
			if s, err = ReadSnapshots(ctx, c, []VoucherKeys{vk}, held); err != nil || len(s) != 1 {
				t.Fatal(s, err)
			}
		})
		return s[0], n
	}
	s, a := read(small, QuickHeld)
	l, b := read(large, QuickHeld)
	if !s.Loaded || s.Stock != 7 || s.Held != -1 || s.Orders != 100 || l.Held != -1 || l.Orders != 50_000 {
		t.Errorf("quick snapshots: %+v and %+v; want Held -1 and the orders counted", s, l)
	}
	if a["hvals"] != 0 || b["hvals"] != 0 || len(a) != len(b) {
		t.Errorf("quick snapshots read the buyers: %v (100 buyers) and %v (50,000)", a, b)
	}
	for cmd, n := range a {
		if b[cmd] != n {
			t.Errorf("quick snapshots ran %v for 100 buyers, %v for 50,000", a, b)
			break
		}
	}
	if l, _ := read(large, CountHeld); l.Held != 100_000 || l.InitialStock != l.Stock+l.Held {
		t.Errorf("counted snapshot %+v; want 100,000 units held, stock + held = initial", l)
	}
	for _, held := range []HeldMode{QuickHeld, CountHeld} {
		if o, calls := read(one, held); o.Held != 500 || o.Orders != 500 || calls["hvals"] != 0 {
			t.Errorf("limit 1, %v: %+v, %v; want 500 buyers by HLEN", held, o, calls)
		}
	}
}

// BenchmarkSnapshot reads the snapshot of a voucher of 100,000 buyers
// with a limit of 2, as the sampler and GET of a voucher do (quick) and as
// an audit does (count), on a private Redis: ns/op is the round trip,
// almost all Redis's time for count.
//
//	go test -run '^$' -bench Snapshot -benchtime 20x ./async/internal/layout/
func BenchmarkSnapshot(b *testing.B) {
	srv := testenv.StartRedis(b)
	c := srv.Client(b)
	vk := New("s:").Voucher(1)
	fillBuyers(b, c, vk, 2, 100_000, 1)
	for _, held := range []HeldMode{QuickHeld, CountHeld} {
		b.Run(held.String(), func(b *testing.B) {
			for b.Loop() {
				if _, err := ReadSnapshots(context.Background(), c, []VoucherKeys{vk}, held); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
