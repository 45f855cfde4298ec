package flashsale_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
)

func TestVoucherValidate(t *testing.T) {
	begin := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ok := flashsale.Voucher{Title: "t", Stock: 1, BeginTime: begin, EndTime: begin.Add(time.Hour)}
	tests := []struct {
		name   string
		change func(v *flashsale.Voucher)
		want   string // error code, "" for valid
	}{
		{"valid", func(*flashsale.Voucher) {}, ""},
		{"no title", func(v *flashsale.Voucher) { v.Title = "" }, flashsale.EInvalid},
		{"long title", func(v *flashsale.Voucher) { v.Title = string(make([]byte, 256)) }, flashsale.EInvalid},
		{"zero stock", func(v *flashsale.Voucher) { v.Stock = 0 }, flashsale.EInvalid},
		{"negative stock", func(v *flashsale.Voucher) { v.Stock = -1 }, flashsale.EInvalid},
		{"huge stock", func(v *flashsale.Voucher) { v.Stock = flashsale.MaxStock + 1 }, flashsale.EInvalid},
		{"negative price", func(v *flashsale.Voucher) { v.PayValue = -1 }, flashsale.EInvalid},
		{"no begin", func(v *flashsale.Voucher) { v.BeginTime = time.Time{} }, flashsale.EInvalid},
		{"end before begin", func(v *flashsale.Voucher) { v.EndTime = begin.Add(-time.Second) }, flashsale.EInvalid},
		{"end equals begin", func(v *flashsale.Voucher) { v.EndTime = begin }, flashsale.EInvalid},
		{"window under a microsecond", func(v *flashsale.Voucher) {
			v.BeginTime, v.EndTime = begin.Add(100*time.Nanosecond), begin.Add(900*time.Nanosecond)
		}, flashsale.EInvalid},
		{"window of one microsecond", func(v *flashsale.Voucher) { v.EndTime = begin.Add(time.Microsecond) }, ""},
		{"end past year 9999 in UTC", func(v *flashsale.Voucher) {
			v.EndTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("-01:00", -3600))
		}, flashsale.EInvalid},
		{"begin before year 1000", func(v *flashsale.Voucher) { v.BeginTime = time.Date(999, 12, 31, 0, 0, 0, 0, time.UTC) }, flashsale.EInvalid},
		{"end in year 9999", func(v *flashsale.Voucher) { v.EndTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := ok
			tt.change(&v)
			if got := flashsale.ErrorCode(v.Validate()); got != tt.want {
				t.Fatalf("Validate() code %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVoucherCheckWindow(t *testing.T) {
	begin := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	v := flashsale.Voucher{BeginTime: begin, EndTime: begin.Add(time.Hour)}
	tests := []struct {
		now  time.Time
		want string
	}{
		{begin.Add(-time.Nanosecond), flashsale.ENotStarted},
		{begin, ""},
		{begin.Add(time.Hour - time.Nanosecond), ""},
		{begin.Add(time.Hour), flashsale.EEnded},
	}
	for _, tt := range tests {
		if got := flashsale.ErrorCode(v.CheckWindow(tt.now)); got != tt.want {
			t.Errorf("CheckWindow(%s) = %q, want %q", tt.now, got, tt.want)
		}
	}
}

func TestErrorHelpers(t *testing.T) {
	busy := &flashsale.Error{Code: flashsale.EBusy, Message: "try later", RetryAfter: time.Second}
	wrapped := fmt.Errorf("placing order: %w", busy)
	tests := []struct {
		err          error
		code, msg    string
		retryAfter   time.Duration
		errorsIsBusy bool
	}{
		{nil, "", "", 0, false},
		{errors.New("boom"), flashsale.EInternal, "internal error", 0, false},
		{busy, flashsale.EBusy, "try later", time.Second, true},
		{wrapped, flashsale.EBusy, "try later", time.Second, true},
		{flashsale.Errorf(flashsale.ENotFound, "voucher %d", 7), flashsale.ENotFound, "voucher 7", 0, false},
	}
	for _, tt := range tests {
		if got := flashsale.ErrorCode(tt.err); got != tt.code {
			t.Errorf("ErrorCode(%v) = %q, want %q", tt.err, got, tt.code)
		}
		if got := flashsale.ErrorMessage(tt.err); got != tt.msg {
			t.Errorf("ErrorMessage(%v) = %q, want %q", tt.err, got, tt.msg)
		}
		if got := flashsale.RetryAfter(tt.err); got != tt.retryAfter {
			t.Errorf("RetryAfter(%v) = %v, want %v", tt.err, got, tt.retryAfter)
		}
		if got := errors.Is(tt.err, busy); got != tt.errorsIsBusy {
			t.Errorf("errors.Is(%v, busy) = %v", tt.err, got)
		}
	}
}
