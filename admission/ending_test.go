package admission_test

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/admission"
)

// A sale that ends with units left turns its waiting tickets sold_out
// (final) at the next step, rather than leaving them waiting.
func TestEndedSaleTurnsWaitingSoldOut(t *testing.T) {
	// Long enough for the set-up and the joins on a loaded machine.
	end := time.Now().Add(4 * time.Second)
	e := newWindowEnv(t, 100, 1, time.Now().Add(-time.Second), end)
	tickets := map[int64]string{}
	for u := int64(1); u <= 5; u++ {
		tickets[u] = e.join(u).Ticket
	}
	waitFor(end.Add(50 * time.Millisecond))
	e.admitUntil(func() bool { return e.poll(5, tickets[5]).State != admission.Waiting })
	for u, tk := range tickets {
		if got := e.poll(u, tk); got.State != admission.SoldOut || got.Pass != "" {
			t.Errorf("user %d after the end: %+v, want sold_out", u, got)
		}
	}
}

// The room of a sale that ended over an hour ago is deleted: every key,
// and its place in the set of rooms the steps visit.
func TestFinishedSaleRoomDeleted(t *testing.T) {
	e := newWindowEnv(t, 10, 5, time.Now().Add(-3*time.Hour), time.Now().Add(-2*time.Hour))
	room := e.prefix + "{q" + strconv.FormatInt(e.v.ID, 10) + "}:"
	c := e.client
	for _, cmd := range []func() error{
		func() error {
			return c.Do(e.ctx, c.B().Sadd().Key(e.prefix+"queues").Member(strconv.FormatInt(e.v.ID, 10)).Build()).Error()
		},
		func() error {
			return c.Do(e.ctx, c.B().Zadd().Key(room+"w").ScoreMember().ScoreMember(1, "7").Build()).Error()
		},
		func() error {
			return c.Do(e.ctx, c.B().Hset().Key(room+"d").FieldValue().FieldValue("8", "x:s").Build()).Error()
		},
		func() error {
			return c.Do(e.ctx, c.B().Hset().Key(room+"m").FieldValue().FieldValue("round", "1").Build()).Error()
		},
	} {
		if err := cmd(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.q.AdmitAll(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"w", "p", "x", "c", "d", "m", "l"} {
		if n, err := c.Do(e.ctx, c.B().Exists().Key(room+k).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("key %s%s: exists %d, %v; want deleted", room, k, n, err)
		}
	}
	if rooms, err := e.q.Rooms(e.ctx); err != nil || len(rooms) != 0 {
		t.Errorf("rooms after the retirement: %v, %v; want none", rooms, err)
	}
}

// A zoned IPv6 address (a link-local peer) is denied by its prefix, and an
// IPv4-mapped prefix too short to name IPv4 addresses is refused rather
// than read as every IPv4 address.
func TestDenyListZonesAndMappedPrefixes(t *testing.T) {
	e := newEnv(t, 10, 100, 0)
	if _, err := e.q.SetDenyList(e.ctx, admission.DenyList{IPs: []string{"fe80::/64"}}); err != nil {
		t.Fatal(err)
	}
	if denied, err := e.q.Denied(e.ctx, 1, netip.MustParseAddr("fe80::1%eth0")); err != nil || !denied {
		t.Errorf("fe80::1%%eth0 under fe80::/64: denied %v, %v", denied, err)
	}
	_, err := e.q.SetDenyList(e.ctx, admission.DenyList{IPs: []string{"::ffff:0:0/80"}})
	if flashsale.ErrorCode(err) != flashsale.EInvalid {
		t.Errorf("::ffff:0:0/80: %v, want invalid", err)
	}
	if denied, err := e.q.Denied(e.ctx, 1, netip.MustParseAddr("192.0.2.7")); err != nil || denied {
		t.Errorf("192.0.2.7 after the refused prefix: denied %v, %v", denied, err)
	}
}

// failingReader is MySQL down: every read fails.
type failingReader struct{}

func (failingReader) Voucher(context.Context, int64) (*flashsale.Voucher, error) {
	return nil, flashsale.Errorf(flashsale.EUnavailable, "mysql is down")
}

// An instance (re)started while MySQL is down knows a voucher's waiting
// room from the copy an earlier read left in Redis: it still asks for a
// pass and still admits; a voucher nobody read is unavailable, never open.
func TestConfigOutlivesAMySQLOutage(t *testing.T) {
	e := newEnv(t, 10, 100, 0)
	first := e.join(1) // the first instance read MySQL
	q, err := admission.New(e.client, admission.Config{Prefix: e.prefix, Secret: secret, Vouchers: failingReader{},
		Units: func(context.Context, int64) (int, error) { return 10, nil }})
	if err != nil {
		t.Fatal(err)
	}
	orders := admission.Wrap(nil, q)
	_, err = orders.PlaceOrder(e.ctx, flashsale.OrderRequest{VoucherID: e.v.ID, UserID: 2, Quantity: 1})
	if flashsale.ErrorCode(err) != flashsale.EPassRequired {
		t.Fatalf("an order without a pass on the restarted instance: %v, want pass_required", err)
	}
	if got, err := q.Join(e.ctx, e.v.ID, 1); err != nil || got.Ticket != first.Ticket {
		t.Fatalf("joining again on the restarted instance: %+v, %v; want ticket %s", got, err, first.Ticket)
	}
	_, err = orders.PlaceOrder(e.ctx, flashsale.OrderRequest{VoucherID: e.v.ID + 1_000_000, UserID: 2, Quantity: 1})
	if flashsale.ErrorCode(err) != flashsale.EUnavailable {
		t.Fatalf("a voucher nobody read, MySQL down: %v, want unavailable", err)
	}
}
