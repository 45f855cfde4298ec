// Package flashsale holds the domain of a flash sale ("seckill"): vouchers
// with a limited stock and a sale window, and the orders buyers place for
// them. Subpackages implement these types against real dependencies:
// store (SQL), async (the Redis gate and stream consumer), strategy (the
// synchronous ways to take an order), httpapi (HTTP), and cmd/flashsale
// wires them together.
package flashsale

import (
	"context"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Voucher is a seckill voucher: a limited stock sold during a sale window.
type Voucher struct {
	ID    int64  `json:"id,string"`
	Title string `json:"title"`
	// PayValue and ActualValue are optional prices in cents (what the buyer
	// pays, and what the voucher is worth).
	PayValue    int64 `json:"pay_value,omitempty"`
	ActualValue int64 `json:"actual_value,omitempty"`
	// Stock is the stock the voucher was created with; Remaining is what is
	// left now, and Orders counts the orders placed.
	Stock     int       `json:"stock"`
	Remaining int       `json:"remaining"`
	Orders    int       `json:"orders"`
	BeginTime time.Time `json:"begin_time"`
	EndTime   time.Time `json:"end_time"`
	// Shards is how many parts the async gate splits the stock into, each
	// on its own Redis slot, so a hot voucher is served by several Redis
	// nodes (1 to MaxShards; 0 means 1). Synchronous strategies take only 1.
	Shards int `json:"shards"`
	// PaymentWindowSeconds is how long a buyer has to pay (0 to
	// MaxPaymentWindowSeconds): an order awaits payment that long, then
	// expires and its units go back on sale. 0: no payment step; orders
	// are final at created.
	PaymentWindowSeconds int `json:"payment_window_seconds"`
	// LimitPerBuyer bounds the units one buyer's live orders may hold (1
	// to MaxLimitPerBuyer, at most the stock; 0 means 1).
	LimitPerBuyer int `json:"limit_per_buyer"`
	// Admission is how buyers reach the order route: AdmissionOpen (or
	// "": anyone may order) or AdmissionQueue (a waiting room hands out
	// single-use passes, AdmitPerSecond of them at most per second;
	// package admission).
	Admission      string    `json:"admission"`
	AdmitPerSecond int       `json:"admit_per_second"`
	CreatedAt      time.Time `json:"-"`
}

// Admission modes of a voucher, and the bound of its admission rate.
const (
	AdmissionOpen     = "open"
	AdmissionQueue    = "queue"
	MaxAdmitPerSecond = 100_000
)

// Queued reports whether buyers need a pass from the waiting room.
func (v *Voucher) Queued() bool { return v.Admission == AdmissionQueue }

// checkAdmission reports a problem with the admission fields as EInvalid.
func (v *Voucher) checkAdmission() error {
	switch v.Admission {
	case "", AdmissionOpen:
		if v.AdmitPerSecond != 0 {
			return Errorf(EInvalid, `admit_per_second is only for "admission": "queue"`)
		}
	case AdmissionQueue:
		if v.AdmitPerSecond < 1 || v.AdmitPerSecond > MaxAdmitPerSecond {
			return Errorf(EInvalid, "admit_per_second must be 1 to %d with a queue", MaxAdmitPerSecond)
		}
	default:
		return Errorf(EInvalid, `admission must be "open" or "queue"`)
	}
	return nil
}

// Bounds of a voucher's purchase rules.
const (
	MaxPaymentWindowSeconds = 86400
	MaxLimitPerBuyer        = 100
)

// PaymentWindow returns PaymentWindowSeconds as a duration.
func (v *Voucher) PaymentWindow() time.Duration {
	return time.Duration(v.PaymentWindowSeconds) * time.Second
}

// BuyerLimit returns LimitPerBuyer, or 1 when it is 0 (not given).
func (v *Voucher) BuyerLimit() int { return max(v.LimitPerBuyer, 1) }

// MaxShards bounds Voucher.Shards.
const MaxShards = 64

// ShardCount returns Shards, or 1 when it is 0 (not given).
func (v *Voucher) ShardCount() int { return max(v.Shards, 1) }

// Validate reports the first problem with a voucher about to be created as
// an EInvalid error.
func (v *Voucher) Validate() error {
	if err := checkTitle(v.Title); err != nil {
		return err
	}
	switch {
	case v.Stock <= 0:
		return Errorf(EInvalid, "stock must be a positive number")
	case v.Stock > MaxStock:
		return Errorf(EInvalid, "stock must be at most %d", MaxStock)
	case v.Shards < 0 || v.Shards > MaxShards:
		return Errorf(EInvalid, "shards must be 1 to %d", MaxShards)
	case v.Shards > v.Stock:
		return Errorf(EInvalid, "shards must be at most the stock (%d)", v.Stock)
	case v.PaymentWindowSeconds < 0 || v.PaymentWindowSeconds > MaxPaymentWindowSeconds:
		return Errorf(EInvalid, "payment_window_seconds must be 0 to %d", MaxPaymentWindowSeconds)
	case v.LimitPerBuyer < 0 || v.LimitPerBuyer > MaxLimitPerBuyer:
		return Errorf(EInvalid, "limit_per_buyer must be 1 to %d", MaxLimitPerBuyer)
	case v.LimitPerBuyer > v.Stock:
		return Errorf(EInvalid, "limit_per_buyer must be at most the stock (%d)", v.Stock)
	case v.PayValue < 0 || v.ActualValue < 0 || v.PayValue > MaxPrice || v.ActualValue > MaxPrice:
		return Errorf(EInvalid, "pay_value and actual_value must be 0 to %d cents", int64(MaxPrice))
	case v.BeginTime.IsZero() || v.EndTime.IsZero():
		return Errorf(EInvalid, "begin_time and end_time are required")
	case !inTimeRange(v.BeginTime) || !inTimeRange(v.EndTime):
		return Errorf(EInvalid, "begin_time and end_time must be in the years 1000 to 9999 (UTC)")
	case !v.EndTime.Truncate(TimePrecision).After(v.BeginTime.Truncate(TimePrecision)):
		return Errorf(EInvalid, "end_time must be after begin_time (to the microsecond)")
	}
	return v.checkAdmission()
}

// MaxTitleBytes bounds a voucher's title, in bytes of UTF-8.
const MaxTitleBytes = 255

// checkTitle requires a title of at most MaxTitleBytes and refuses what would make a title display as something other
// than it is: bytes that are not UTF-8 (and U+FFFD, which a JSON decoder
// puts in their place or in that of an unpaired surrogate escape), C0 and
// C1 control characters, and the bidirectional embedding, override and
// isolate characters, which can reorder the text around them on screen. A
// title is one line, so newline, tab and the Unicode line and paragraph
// separators are refused too.
func checkTitle(title string) error {
	switch {
	case title == "":
		return Errorf(EInvalid, "title is required")
	case len(title) > MaxTitleBytes:
		return Errorf(EInvalid, "title is longer than %d bytes", MaxTitleBytes)
	}
	for i, r := range title {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(title[i:]); n == 1 {
				return Errorf(EInvalid, "title is not valid UTF-8 (at byte %d)", i)
			}
			return Errorf(EInvalid, "title must not contain U+FFFD, the replacement character (at byte %d): the text it came from was not valid UTF-8", i)
		case r < 0x20 || r >= 0x7f && r <= 0x9f:
			return Errorf(EInvalid, "title must not contain the control character %U (at byte %d); a title is one line, without tabs", r, i)
		case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
			return Errorf(EInvalid, "title must not contain the bidirectional control character %U (at byte %d): it can make the text display in another order than it is stored", r, i)
		case r == 0x2028 || r == 0x2029:
			return Errorf(EInvalid, "title must not contain the line or paragraph separator %U (at byte %d); a title is one line", r, i)
		}
	}
	return nil
}

// ParseID parses s as an id: a positive decimal integer within int64,
// written in its one canonical form (digits only, no sign, no leading
// zeros), so that one id has one spelling in paths, tokens and keys.
func ParseID(s string) (int64, error) {
	if s == "" || len(s) > 19 || s[0] < '1' || s[0] > '9' {
		return 0, fmt.Errorf("%q is not a positive decimal integer without sign or leading zeros", s)
	}
	for i := 1; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a positive decimal integer without sign or leading zeros", s)
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is larger than the largest id, %d", s, int64(1<<63-1))
	}
	return id, nil
}

// inTimeRange reports whether t, in UTC, is in the years MySQL's DATETIME
// holds and RFC 3339 can write: an offset can push a valid-looking input
// such as 9999-12-31T23:59:59-01:00 into year 10000.
func inTimeRange(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1000 && y <= 9999
}

// TimePrecision is how precisely vouchers' times are kept: finer parts
// are dropped when a voucher is stored, so a sale window must be at least
// this long once they are.
const TimePrecision = time.Microsecond

// MaxPrice bounds a voucher's prices, in cents (ten billion in the
// currency): a price times the largest quantity stays far inside 64 bits.
const MaxPrice = 1_000_000_000_000

// MaxStock bounds a voucher's stock; it keeps counts well inside 32 bits.
const MaxStock = 100_000_000

// CheckWindow returns ENotStarted or EEnded when now is outside the sale
// window [BeginTime, EndTime).
func (v *Voucher) CheckWindow(now time.Time) error {
	if now.Before(v.BeginTime) {
		return Errorf(ENotStarted, "the sale has not started")
	}
	if !now.Before(v.EndTime) {
		return Errorf(EEnded, "the sale has ended")
	}
	return nil
}

// OrderStatus is where an order is in its life (docs/lifecycle.md).
type OrderStatus string

// Order statuses. An order taken by the async gate is pending until the
// consumer persists it. Without a payment window an order is then created,
// and final; with one it awaits payment until it is paid, cancelled by its
// buyer, or expired at its PayBy. A failed order was dead-lettered before
// it reached the database.
const (
	StatusPending         OrderStatus = "pending"
	StatusAwaitingPayment OrderStatus = "awaiting_payment"
	StatusPaid            OrderStatus = "paid"
	StatusCancelled       OrderStatus = "cancelled"
	StatusExpired         OrderStatus = "expired"
	StatusCreated         OrderStatus = "created"
	StatusFailed          OrderStatus = "failed"
)

// OrderStatuses lists every status.
func OrderStatuses() []OrderStatus {
	return []OrderStatus{StatusPending, StatusAwaitingPayment, StatusPaid, StatusCancelled, StatusExpired, StatusCreated, StatusFailed}
}

// Live reports whether an order with status s holds its units.
func (s OrderStatus) Live() bool {
	switch s {
	case StatusPending, StatusAwaitingPayment, StatusPaid, StatusCreated:
		return true
	}
	return false
}

// Order is one buyer's order of Quantity units of one voucher.
type Order struct {
	ID        int64       `json:"order_id,string"`
	VoucherID int64       `json:"voucher_id,string"`
	UserID    int64       `json:"user_id,string"`
	Quantity  int         `json:"quantity"`
	Status    OrderStatus `json:"status"`
	// PayBy is when an order awaiting payment expires; zero for an order
	// without a payment step.
	PayBy time.Time `json:"-"`
	// PaymentID is the payment that paid the order, once paid.
	PaymentID string `json:"-"`
	// IdempotencyKey is the key of the request that placed the order, if
	// it had one.
	IdempotencyKey string    `json:"-"`
	CreatedAt      time.Time `json:"-"`
	UpdatedAt      time.Time `json:"-"`
}

// Units returns Quantity, or 1 when it is 0 (not given).
func (o *Order) Units() int { return max(o.Quantity, 1) }

// OrderRequest is a buyer's request for units of a voucher.
type OrderRequest struct {
	VoucherID, UserID int64
	// Quantity is the units asked for, 1 to the voucher's limit per buyer;
	// 0 means 1.
	Quantity int
	// IdempotencyKey, when set, makes a retry of the request with the same
	// key get the first request's answer again (MaxIdempotencyKeyBytes).
	IdempotencyKey string
	// Pass is the waiting room's purchase pass (the Flashsale-Pass
	// header): a queue voucher's order needs one (package admission).
	Pass string
}

// MaxIdempotencyKeyBytes bounds an idempotency key.
const MaxIdempotencyKeyBytes = 255

// Units returns Quantity, or 1 when it is 0 (not given).
func (r OrderRequest) Units() int { return max(r.Quantity, 1) }

// CheckQuantity returns EInvalid unless the request asks for 1 to the
// voucher's limit per buyer of units.
func CheckQuantity(v *Voucher, r OrderRequest) error {
	if r.Quantity < 0 || r.Units() > v.BuyerLimit() {
		return Errorf(EInvalid, "quantity must be 1 to %d, the voucher's limit per buyer", v.BuyerLimit())
	}
	return nil
}

// Payment is the payment provider's word that an order was paid.
type Payment struct {
	// ID is the provider's id of the payment: the same payment sent again
	// gets the same answer.
	ID      string `json:"payment_id"`
	OrderID int64  `json:"order_id,string"`
	// Amount is what was paid, in cents: the voucher's PayValue times the
	// order's quantity.
	Amount int64 `json:"amount"`
}

// MaxPaymentIDBytes bounds a payment id.
const MaxPaymentIDBytes = 255

// VoucherService creates and finds vouchers.
type VoucherService interface {
	// CreateVoucher validates v, assigns v.ID and stores it with its full
	// stock remaining.
	CreateVoucher(ctx context.Context, v *Voucher) error
	// FindVoucher returns the voucher with its remaining stock and order
	// count, or ENotFound.
	FindVoucher(ctx context.Context, id int64) (*Voucher, error)
	// FindVouchers returns up to limit vouchers, newest (highest id)
	// first, with the figures FindVoucher gives. With before > 0 only ids
	// below it: the last id of one page asks for the next one.
	FindVouchers(ctx context.Context, before int64, limit int) ([]*Voucher, error)
}

// OrderService takes, finds and ends orders.
type OrderService interface {
	// PlaceOrder takes an order of req.Units() units of a voucher for a
	// user: created, or awaiting payment when the voucher has a payment
	// window (pending first in the async strategy). It returns EInvalid
	// for a quantity outside 1 to the voucher's limit, ENotFound,
	// ENotStarted, EEnded, ESoldOut (fewer units left than asked),
	// EDuplicateOrder (a limit of 1) or ELimitReached, or EBusy when it is
	// refused, and EUnavailable (with a RetryAfter) when a server it needs
	// cannot be reached.
	PlaceOrder(ctx context.Context, req OrderRequest) (*Order, error)
	// FindOrder returns the order with the given id, or ENotFound.
	FindOrder(ctx context.Context, id int64) (*Order, error)
	// CancelOrder cancels the user's order awaiting payment and puts its
	// units back on sale; the same cancel again answers the same. It
	// returns ENotFound (also for another user's order), EAlreadyPaid or
	// EOrderClosed (expired, or final without a payment step).
	CancelOrder(ctx context.Context, id, userID int64) (*Order, error)
	// PayOrder records the payment provider's payment of an order awaiting
	// payment; the same payment again answers the same. It returns
	// ENotFound, EAlreadyPaid (another payment paid it), EOrderClosed
	// (cancelled, expired, or final: the provider refunds) or EInvalid (a
	// wrong amount).
	PayOrder(ctx context.Context, p Payment) (*Order, error)
}

// IDGenerator hands out unique 64-bit IDs.
type IDGenerator interface {
	NextID(ctx context.Context) (int64, error)
}
