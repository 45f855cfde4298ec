package admission

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
)

type noVouchers struct{}

func (noVouchers) Voucher(context.Context, int64) (*flashsale.Voucher, error) {
	return nil, flashsale.Errorf(flashsale.ENotFound, "none")
}

// TestDenyListPutNotUndoneByAnOlderRead: a background read of the deny
// list that began before a PUT /api/denylist (its copy's time is
// earlier) does not replace the PUT's list on this instance (issue 32).
// Before the fix the read's copy was stored whatever its time, and the
// denied user was let in for up to a second.
func TestDenyListPutNotUndoneByAnOlderRead(t *testing.T) {
	client, prefix := testenv.Redis(t)
	q, err := New(client, Config{Prefix: prefix, Secret: []byte(strings.Repeat("s", 32)), Vouchers: noVouchers{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before := time.Now()
	old, err := compile(DenyList{}) // what a read that began now finds
	if err != nil {
		t.Fatal(err)
	}
	old.at = before
	if _, err := q.SetDenyList(ctx, DenyList{Users: []string{"7"}}); err != nil {
		t.Fatal(err)
	}
	q.keepDeny(old) // the read ends after the PUT
	if denied, err := q.Denied(ctx, 7, netip.Addr{}); err != nil || !denied {
		t.Fatalf("user 7 denied after the PUT and an older read: %v, %v; want true", denied, err)
	}
}
