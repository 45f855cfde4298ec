package idempotency_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/idempotency"
	"github.com/flashsale/flashsale/internal/testenv"
)

// redisKeys returns the keys under prefix.
func redisKeys(t *testing.T, prefix string) []string {
	t.Helper()
	rc, _ := testenv.Redis(t)
	keys, err := rc.Do(context.Background(), rc.B().Keys().Pattern(prefix+"{v*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestNoKeyKeptForEarlyRefusals: a refusal decided before anything was
// written (no such voucher, a quantity over the limit) leaves no key in
// Redis, however many keys a buyer sends (issue 33: each was kept 24 h).
func TestNoKeyKeptForEarlyRefusals(t *testing.T) {
	_, prefix := testenv.Redis(t)
	services, _, v := instances(t, 1, idempotency.Config{Prefix: prefix + "i:"})
	for i := range 50 {
		req := flashsale.OrderRequest{VoucherID: v.ID + 1000, UserID: 7, IdempotencyKey: fmt.Sprint("k", i)}
		if _, err := services[0].PlaceOrder(t.Context(), req); flashsale.ErrorCode(err) != flashsale.ENotFound {
			t.Fatalf("unknown voucher: %v, want not_found", err)
		}
		req = flashsale.OrderRequest{VoucherID: v.ID, UserID: 7, Quantity: 50, IdempotencyKey: fmt.Sprint("q", i)}
		if _, err := services[0].PlaceOrder(t.Context(), req); flashsale.ErrorCode(err) != flashsale.EInvalid {
			t.Fatalf("quantity over the limit: %v, want invalid", err)
		}
	}
	if keys := redisKeys(t, prefix+"i:"); len(keys) != 0 {
		t.Fatalf("refusals left %d keys in Redis: %v", len(keys), keys[:min(5, len(keys))])
	}
}

// TestKeysPerBuyerBounded: a buyer holds at most MaxKeys keys of a
// voucher; another key is rate_limited, a held key still answers, and
// other buyers are not affected.
func TestKeysPerBuyerBounded(t *testing.T) {
	_, prefix := testenv.Redis(t)
	services, _, v := instances(t, 1, idempotency.Config{Prefix: prefix + "i:", MaxKeys: 5})
	s := services[0]
	place := func(user int64, key string) error {
		_, err := s.PlaceOrder(t.Context(), flashsale.OrderRequest{VoucherID: v.ID, UserID: user, IdempotencyKey: key})
		return err
	}
	if err := place(1, "k0"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 5; i++ { // the limit is 3 units: kept refusals from the 4th
		_ = place(1, fmt.Sprint("k", i))
	}
	for i := 5; i < 40; i++ {
		if err := place(1, fmt.Sprint("k", i)); flashsale.ErrorCode(err) != flashsale.ERateLimited || flashsale.RetryAfter(err) <= 0 {
			t.Fatalf("key %d past the bound: %v, want rate_limited with a Retry-After", i, err)
		}
	}
	if err := place(1, "k0"); err != nil {
		t.Fatalf("a held key again: %v, want its first answer", err)
	}
	if err := place(2, "k0"); flashsale.ErrorCode(err) != flashsale.ESoldOut { // buyer 1 took the 3 units
		t.Fatalf("another buyer: %v, want sold_out", err)
	}
	// 6 keys (5 of buyer 1, 1 of buyer 2) and their 2 counts.
	if keys := redisKeys(t, prefix+"i:"); len(keys) != 8 {
		t.Fatalf("%d keys in Redis, want 8: %v", len(keys), keys)
	}
}
