package consume_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/layout"
)

// TestKeyConflictIsDeadLetteredAndTheStreamGoesOn: an accepted order whose
// idempotency key another order of its user holds in MySQL already (the
// gate's keyed hash lost it) is dead-lettered with kind key_conflict, and
// the orders after it in the stream are persisted (issue 32).
//
// It failed before the fix: INSERT IGNORE skipped the row on the unique
// key, which the store took for a race with another writer (busy) and
// the consumer retried for ever; nothing after it was persisted.
func TestKeyConflictIsDeadLetteredAndTheStreamGoesOn(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	v := &flashsale.Voucher{Title: "t", Stock: 10, LimitPerBuyer: 3, BeginTime: time.Now().Add(-time.Minute), EndTime: time.Now().Add(time.Hour)}
	if err := e.Svc.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	// The key's first order reached MySQL; Redis forgot the key.
	first := &flashsale.Order{ID: 1, VoucherID: v.ID, UserID: 7, IdempotencyKey: "k1"}
	if err := e.DB.InsertOrder(ctx, first, 3); err != nil {
		t.Fatal(err)
	}
	dup, err := e.Svc.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: v.ID, UserID: 7, IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	after := e.Buy(v.ID, 8)[0]
	e.Run(consume.New(e.Client, e.DB, e.ConsumerConfig()))
	e.WaitFor("the order after the conflicting one in MySQL, and a dead letter", 30*time.Second, func() (bool, error) {
		_, err := e.DB.FindOrder(ctx, after.ID)
		return err == nil && len(e.DeadLetters(v.ID)) > 0, nil
	})
	dead := e.DeadLetters(v.ID)
	if len(dead) != 1 {
		t.Fatalf("dead letters = %v; want the order %d placed again with key k1", dead, dup.ID)
	}
	d := dead[0].FieldValues
	if d[layout.FieldOrder] != itoa(dup.ID) || d[layout.FieldKind] != string(layout.DeadKeyConflict) || !strings.Contains(d[layout.FieldReason], "idempotency key") {
		t.Errorf("dead letter = %v; want order %d, kind %s, a reason naming the idempotency key", d, dup.ID, layout.DeadKeyConflict)
	}
}
