package flashsale_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
		{"shards 64", func(v *flashsale.Voucher) { v.Stock, v.Shards = 100, 64 }, ""},
		{"shards 65", func(v *flashsale.Voucher) { v.Stock, v.Shards = 100, 65 }, flashsale.EInvalid},
		{"negative shards", func(v *flashsale.Voucher) { v.Shards = -1 }, flashsale.EInvalid},
		{"shards over stock", func(v *flashsale.Voucher) { v.Stock, v.Shards = 2, 3 }, flashsale.EInvalid},
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

func TestVoucherValidateTitle(t *testing.T) {
	begin := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		title   string
		message string // "" for valid
	}{
		{"100 off", ""},
		{"Ünïcödé 秒杀 🎉", ""},
		{"a\u200fb", ""}, // a right-to-left mark is not an override
		{"a\x00b", "control character U+0000"},
		{"a\nb", "control character U+000A"},
		{"a\tb", "control character U+0009"},
		{"a\x7fb", "control character U+007F"},
		{"a\u0085b", "control character U+0085"},
		{"a\u202eb", "bidirectional control character U+202E"},
		{"a\u202ab", "bidirectional control character U+202A"},
		{"a\u2066b", "bidirectional control character U+2066"},
		{"a\u2069b", "bidirectional control character U+2069"},
		{"a\u2028b", "line or paragraph separator U+2028"},
		{"a\xffb", "not valid UTF-8 (at byte 1)"},
		{"a\xe2\x82", "not valid UTF-8"},
		{"a\ufffdb", "U+FFFD"},
		{strings.Repeat("é", 128), "longer than 255 bytes"},
		{strings.Repeat("x", 255), ""},
	}
	for _, tt := range tests {
		v := flashsale.Voucher{Title: tt.title, Stock: 1, BeginTime: begin, EndTime: begin.Add(time.Hour)}
		err := v.Validate()
		if tt.message == "" && err != nil || tt.message != "" && (flashsale.ErrorCode(err) != flashsale.EInvalid || !strings.Contains(flashsale.ErrorMessage(err), tt.message)) {
			t.Errorf("Validate(title %q) = %v; want %q", tt.title, err, tt.message)
		}
	}
}

func TestParseID(t *testing.T) {
	tests := []struct {
		in   string
		want int64 // 0: refused
	}{
		{"7", 7},
		{"1", 1},
		{"9223372036854775807", 1<<63 - 1},
		{"", 0},
		{"0", 0},
		{"+7", 0},
		{"-1", 0},
		{"007", 0},
		{"07", 0},
		{" 7", 0},
		{"7 ", 0},
		{"1.5", 0},
		{"1e3", 0},
		{"0x10", 0},
		{"９", 0}, // a full-width digit
		{"9223372036854775808", 0},
		{"99999999999999999999", 0},
	}
	for _, tt := range tests {
		got, err := flashsale.ParseID(tt.in)
		if got != tt.want || (err == nil) != (tt.want != 0) {
			t.Errorf("ParseID(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestErrorCodesAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range flashsale.ErrorCodes() {
		if c == "" || seen[c] {
			t.Errorf("error code %q is empty or listed twice", c)
		}
		seen[c] = true
	}
	if !seen[flashsale.EMethodNotAllowed] || !seen[flashsale.EInternal] {
		t.Errorf("ErrorCodes() = %v misses codes", flashsale.ErrorCodes())
	}
}

func TestEventJSON(t *testing.T) {
	e := flashsale.Event{ID: "evt_7", Type: flashsale.EventOrderPaid, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("x", 3600)),
		Sequence: 7, Data: []byte(`{"order_id":"1","status":"paid"}`)}
	b, err := json.Marshal(e)
	want := `{"id":"evt_7","type":"order.paid","occurred_at":"2026-01-02T02:04:05.000006Z","sequence":7,"data":{"order_id":"1","status":"paid"}}`
	if err != nil || string(b) != want || string(e.AppendJSON(nil)) != want {
		t.Fatalf("body = %s, %v; want %s", b, err, want)
	}
	var back flashsale.Event
	if err := json.Unmarshal(b, &back); err != nil || back.ID != e.ID || !back.OccurredAt.Equal(e.OccurredAt) || back.Sequence != 7 || flashsale.EventOrder(back.Data) != 1 {
		t.Fatalf("read back %+v, %v", back, err)
	}
	if !flashsale.EventOrderPlaced.Valid() || flashsale.EventType("order.shipped").Valid() {
		t.Error("Valid")
	}
}

// TestOrderEventDataJSON: the hand-written encoders of an order event's
// data write what encoding/json writes.
func TestOrderEventDataJSON(t *testing.T) {
	payBy := time.Date(2026, 11, 28, 20, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, o := range []flashsale.Order{
		{ID: 1, VoucherID: 2, UserID: 3, Status: flashsale.StatusCreated},
		{ID: 4611686018427387904, VoucherID: 9, UserID: 1 << 40, Quantity: 3, Status: flashsale.StatusAwaitingPayment, PayBy: payBy},
		{ID: 5, VoucherID: 6, UserID: 7, Status: flashsale.StatusPaid, PayBy: payBy},
		{ID: 8, VoucherID: 6, UserID: 7, Status: flashsale.StatusPending, PayBy: payBy},
	} {
		want, err := json.Marshal(o.EventData())
		if err != nil {
			t.Fatal(err)
		}
		if got := o.AppendEventData(nil); string(got) != string(want) {
			t.Errorf("AppendEventData = %s, want %s", got, want)
		}
		if got := o.EventData().AppendJSON(nil); string(got) != string(want) {
			t.Errorf("OrderData.AppendJSON = %s, want %s", got, want)
		}
	}
}
