package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

func TestCreateAndFindVoucher(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		before := time.Now().UTC().Add(-time.Second)
		v := createVoucher(t, db, 42, 100)
		got, err := db.FindVoucher(t.Context(), 42)
		if err != nil {
			t.Fatal(err)
		}
		want := flashsale.Voucher{
			ID: 42, Title: "秒杀券 voucher", PayValue: 9900, ActualValue: 10000,
			Stock: 100, Remaining: 100, Orders: 0, Shards: 1, LimitPerBuyer: 1, Admission: flashsale.AdmissionOpen,
			BeginTime: saleStart.UTC().Truncate(time.Microsecond),
			EndTime:   saleStart.Add(2 * time.Hour).UTC().Truncate(time.Microsecond),
			CreatedAt: v.CreatedAt,
		}
		if *got != want || *v != want {
			t.Errorf("FindVoucher =\n %+v\nCreateVoucher left\n %+v\nwant\n %+v", *got, *v, want)
		}
		if got.CreatedAt.Before(before) || got.CreatedAt.Location() != time.UTC {
			t.Errorf("CreatedAt = %v, want a UTC time after %v", got.CreatedAt, before)
		}
		row, err := db.Voucher(t.Context(), 42)
		if err != nil || *row != want {
			t.Errorf("Voucher = %+v, %v; want %+v", row, err, want)
		}
	})
}

func TestFindVoucherNotFound(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		_, err := db.FindVoucher(t.Context(), 1)
		wantCode(t, err, flashsale.ENotFound)
		_, err = db.Voucher(t.Context(), 1)
		wantCode(t, err, flashsale.ENotFound)
	})
}

func TestCreateVoucherInvalid(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(v *flashsale.Voucher)
	}{
		{"zero id", func(v *flashsale.Voucher) { v.ID = 0 }},
		{"negative id", func(v *flashsale.Voucher) { v.ID = -5 }},
		{"no title", func(v *flashsale.Voucher) { v.Title = "" }},
		{"long title", func(v *flashsale.Voucher) { v.Title = strings.Repeat("x", 256) }},
		{"no stock", func(v *flashsale.Voucher) { v.Stock = 0 }},
		{"stock too large", func(v *flashsale.Voucher) { v.Stock = flashsale.MaxStock + 1 }},
		{"negative price", func(v *flashsale.Voucher) { v.PayValue = -1 }},
		{"no window", func(v *flashsale.Voucher) { v.BeginTime = time.Time{} }},
		{"window backwards", func(v *flashsale.Voucher) { v.EndTime = v.BeginTime }},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				v := newVoucher(1, 10)
				tt.mutate(v)
				wantCode(t, db.CreateVoucher(t.Context(), v), flashsale.EInvalid)
			})
		}
		vs, err := db.ListVouchers(t.Context())
		if err != nil || len(vs) != 0 {
			t.Errorf("ListVouchers = %v, %v; want none stored", vs, err)
		}
	})
}

func TestCreateVoucherDuplicateID(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		err := db.CreateVoucher(t.Context(), newVoucher(1, 20))
		if !errors.Is(err, ErrDuplicateID) {
			t.Fatalf("CreateVoucher with a taken id = %v, want ErrDuplicateID", err)
		}
		got, err := db.FindVoucher(t.Context(), 1)
		if err != nil || got.Stock != 10 {
			t.Errorf("FindVoucher = %+v, %v; want the first voucher kept", got, err)
		}
	})
}

// TestLongTitle stores a title of 255 bytes of multi-byte characters: the
// column is utf8mb4 on MySQL.
func TestLongTitle(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		v := newVoucher(1, 1)
		v.Title = strings.Repeat("券", 85) // 255 bytes
		if err := db.CreateVoucher(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		got, err := db.FindVoucher(t.Context(), 1)
		if err != nil || got.Title != v.Title {
			t.Errorf("FindVoucher title = %q, %v; want %q", got.Title, err, v.Title)
		}
	})
}

func TestListVouchers(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		vs, err := db.ListVouchers(t.Context())
		if err != nil || vs == nil || len(vs) != 0 {
			t.Fatalf("ListVouchers on an empty store = %v, %v; want an empty list", vs, err)
		}
		for _, id := range []int64{30, 10, 20} {
			createVoucher(t, db, id, int(id))
		}
		insertOrders(t, db, 20, flashsale.StatusCreated, 1, 2)
		vs, err = db.ListVouchers(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		type brief struct {
			id            int64
			stock, orders int
		}
		var got []brief
		for _, v := range vs {
			got = append(got, brief{v.ID, v.Stock, v.Orders})
		}
		want := []brief{{10, 10, 0}, {20, 20, 2}, {30, 30, 0}}
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("ListVouchers = %+v, want %+v", got, want)
		}
	})
}

// TestFindVoucherCountsLiveOrders counts only the live orders in Orders.
func TestFindVoucherCountsLiveOrders(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		createVoucher(t, db, 1, 10)
		insertOrders(t, db, 1, flashsale.StatusCreated, 1, 2, 3)
		insertOrders(t, db, 1, flashsale.StatusPending, 4)
		insertOrders(t, db, 1, flashsale.StatusFailed, 5)
		got, err := db.FindVoucher(t.Context(), 1)
		if err != nil || got.Orders != 4 {
			t.Errorf("FindVoucher = %+v, %v; want 4 orders (3 created, 1 pending)", got, err)
		}
	})
}

// TestTimeRoundTrip stores times with nanoseconds in several zones: they
// come back in UTC, truncated to the microsecond.
func TestTimeRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		begin time.Time
		want  time.Time
	}{
		{"nanoseconds in UTC+8", time.Date(2025, 6, 18, 0, 0, 0, 123456789, time.FixedZone("CST", 8*3600)),
			time.Date(2025, 6, 17, 16, 0, 0, 123456000, time.UTC)},
		{"last microsecond", time.Date(2025, 12, 31, 23, 59, 59, 999999999, time.UTC),
			time.Date(2025, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		{"whole second west of UTC", time.Date(2025, 1, 1, 0, 0, 0, 0, time.FixedZone("EST", -5*3600)),
			time.Date(2025, 1, 1, 5, 0, 0, 0, time.UTC)},
		{"one microsecond", time.Date(2030, 3, 1, 12, 0, 0, 1000, time.UTC),
			time.Date(2030, 3, 1, 12, 0, 0, 1000, time.UTC)},
	}
	forEachDialect(t, func(t *testing.T, db *DB) {
		for i, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				v := newVoucher(int64(i+1), 1)
				v.BeginTime, v.EndTime = tt.begin, tt.begin.Add(time.Hour)
				if err := db.CreateVoucher(t.Context(), v); err != nil {
					t.Fatal(err)
				}
				got, err := db.FindVoucher(t.Context(), v.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.BeginTime != tt.want || got.EndTime != tt.want.Add(time.Hour) {
					t.Errorf("times = %v, %v; want %v and an hour later, in UTC", got.BeginTime, got.EndTime, tt.want)
				}
			})
		}
	})
}

// TestFindVouchersPages walks every page size over vouchers created out of
// id order and checks the pages are newest first, complete and disjoint,
// with the order counts FindVoucher gives.
func TestFindVouchersPages(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		ids := []int64{5, 1, 9, 3, 7, 2, 8}
		for _, id := range ids {
			createVoucher(t, db, id, 10)
		}
		insertOrders(t, db, 7, flashsale.StatusCreated, 100, 101)
		insertOrders(t, db, 7, flashsale.StatusPending, 102)
		want := []int64{9, 8, 7, 5, 3, 2, 1}
		for limit := 1; limit <= len(want)+1; limit++ {
			var got []int64
			before := int64(0)
			for page := 0; ; page++ {
				vs, err := db.FindVouchers(t.Context(), before, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(vs) > limit || page > len(want) {
					t.Fatalf("limit %d: page %d has %d vouchers", limit, page, len(vs))
				}
				for _, v := range vs {
					got = append(got, v.ID)
					if wantOrders := map[int64]int{7: 3}[v.ID]; v.Orders != wantOrders || v.Stock != 10 {
						t.Fatalf("voucher %d: orders %d stock %d; want %d orders, stock 10", v.ID, v.Orders, v.Stock, wantOrders)
					}
				}
				if len(vs) < limit {
					break
				}
				before = vs[len(vs)-1].ID
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("limit %d: ids %v, want %v", limit, got, want)
			}
		}
		if vs, err := db.FindVouchers(t.Context(), 1, 5); err != nil || len(vs) != 0 {
			t.Fatalf("below the oldest: %d vouchers, %v; want none", len(vs), err)
		}
		_, err := db.FindVouchers(t.Context(), 0, 0)
		wantCode(t, err, flashsale.EInvalid)
	})
}

// TestRecentVouchers lists the vouchers whose sale ends after a time, the
// latest to begin first, up to a limit, without counting their orders.
func TestRecentVouchers(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		for i, shift := range []time.Duration{-3 * time.Hour, 0, time.Hour, 2 * time.Hour} { // ids 1 to 4
			v := newVoucher(int64(i+1), 10)
			v.BeginTime, v.EndTime = v.BeginTime.Add(shift), v.EndTime.Add(shift)
			if err := db.CreateVoucher(t.Context(), v); err != nil {
				t.Fatal(err)
			}
		}
		insertOrders(t, db, 2, flashsale.StatusCreated, 1, 2)
		// Voucher 1's sale ended an hour before saleStart; the others end after it.
		got, err := db.RecentVouchers(t.Context(), saleStart, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != 4 || got[1].ID != 3 {
			t.Fatalf("RecentVouchers(limit 2) = %v, want vouchers 4 and 3", got)
		}
		all, err := db.RecentVouchers(t.Context(), saleStart, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 3 || all[2].ID != 2 || all[2].Orders != 0 || all[2].Stock != 10 || all[2].Title == "" {
			t.Errorf("RecentVouchers(limit 10) = %+v, want vouchers 4, 3, 2 with their rows and no order count", all)
		}
	})
}

// A queue voucher's admission and rate round-trip on both dialects (the
// embedded SQLite serve uses without --db too).
func TestQueueVoucherRoundTrip(t *testing.T) {
	forEachDialect(t, func(t *testing.T, db *DB) {
		v := newVoucher(43, 10)
		v.Admission, v.AdmitPerSecond = flashsale.AdmissionQueue, 250
		if err := db.CreateVoucher(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		got, err := db.Voucher(t.Context(), 43)
		if err != nil || !got.Queued() || got.AdmitPerSecond != 250 {
			t.Fatalf("Voucher = %+v, %v; want a queue voucher admitting 250/s", got, err)
		}
	})
}
