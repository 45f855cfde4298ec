package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
)

// TestSamplerLastSold samples vouchers in a real MySQL between sales: a
// voucher's LastSold is the pass that saw its stock fall, stays there while
// the stock stands still, and a voucher first seen with units sold counts
// as sold at that pass, or at its end if it ended before.
func TestSamplerLastSold(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	now := time.Now().UTC().Truncate(time.Second)
	nextID := int64(100)
	voucher := func(begin, end time.Duration) int64 {
		nextID++
		v := &flashsale.Voucher{ID: nextID, Title: "v", Stock: 5, BeginTime: now.Add(begin), EndTime: now.Add(end)}
		if err := db.CreateVoucher(ctx, v); err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	sell := func(id int64) {
		nextID++
		if _, err := db.SellBatch(ctx, id, []flashsale.Order{{ID: nextID, VoucherID: id, UserID: nextID}}); err != nil {
			t.Fatal(err)
		}
	}
	s := NewSampler(SamplerConfig{DB: db})
	refresh := func() (time.Time, map[int64]time.Time) {
		if err := s.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		last := s.Latest()
		sold := map[int64]time.Time{}
		for _, v := range last.Vouchers {
			sold[v.ID] = v.LastSold
		}
		return last.At, sold
	}
	selling, idle := voucher(-time.Minute, time.Hour), voucher(-time.Minute, time.Hour)
	if _, sold := refresh(); !sold[selling].IsZero() || !sold[idle].IsZero() {
		t.Fatalf("LastSold before any sale: %v", sold)
	}
	sell(selling)
	first, sold := refresh()
	if !sold[selling].Equal(first) || !sold[idle].IsZero() {
		t.Fatalf("after a sale of %d at %v: LastSold %v", selling, first, sold)
	}
	seenSold, ended := voucher(-time.Minute, time.Hour), voucher(-3*time.Minute, -2*time.Minute)
	sell(seenSold)
	sell(ended)
	second, sold := refresh()
	for id, want := range map[int64]time.Time{selling: first, idle: {}, seenSold: second, ended: now.Add(-2 * time.Minute)} {
		if !sold[id].Equal(want) {
			t.Errorf("voucher %d: LastSold %v, want %v", id, sold[id], want)
		}
	}
}

// openDB opens a MySQL database of the test's own.
func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestSamplerAuditsWithinItsDuty checks that the scan of a voucher's
// orders is not repeated every pass when the last one is not due again
// (it took long: auditDuty), while the stock left is read every pass.
func TestSamplerAuditsWithinItsDuty(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	now := time.Now().UTC().Truncate(time.Second)
	v := &flashsale.Voucher{ID: 501, Title: "v", Stock: 5, BeginTime: now.Add(-time.Minute), EndTime: now.Add(time.Hour)}
	if err := db.CreateVoucher(ctx, v); err != nil {
		t.Fatal(err)
	}
	sell := func(id int64) {
		if _, err := db.SellBatch(ctx, v.ID, []flashsale.Order{{ID: id, VoucherID: v.ID, UserID: id}}); err != nil {
			t.Fatal(err)
		}
	}
	s := NewSampler(SamplerConfig{DB: db})
	sample := func() VoucherSample {
		t.Helper()
		if err := s.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		for _, got := range s.Latest().Vouchers {
			if got.ID == v.ID {
				return got
			}
		}
		t.Fatalf("voucher %d not sampled", v.ID)
		return VoucherSample{}
	}
	sell(1001)
	if got := sample(); got.Orders != 1 || got.RemainingMySQL != 4 {
		t.Fatalf("after one sale: orders %d, remaining %d", got.Orders, got.RemainingMySQL)
	}
	s.mu.Lock()
	a := s.audits[v.ID]
	a.next = time.Now().Add(time.Hour) // as after an audit of 72 s
	s.audits[v.ID] = a
	s.mu.Unlock()
	sell(1002)
	if got := sample(); got.Orders != 1 || got.RemainingMySQL != 3 {
		t.Fatalf("audit not due: orders %d (want the last audit's 1), remaining %d (want 3, read now)", got.Orders, got.RemainingMySQL)
	}
	s.mu.Lock()
	a.next = time.Now()
	s.audits[v.ID] = a
	s.mu.Unlock()
	if got := sample(); got.Orders != 2 || got.RemainingMySQL != 3 {
		t.Fatalf("audit due: orders %d, remaining %d; want 2 and 3", got.Orders, got.RemainingMySQL)
	}
}
