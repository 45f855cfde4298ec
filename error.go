package flashsale

import (
	"errors"
	"fmt"
	"time"
)

// Error codes. Each maps to one HTTP status in package httpapi; nothing else
// needs to know about HTTP.
const (
	EInvalid          = "invalid"
	EUnauthorized     = "unauthorized"
	EForbidden        = "forbidden"
	ENotFound         = "not_found"
	EMethodNotAllowed = "method_not_allowed"
	ESoldOut          = "sold_out"
	EDuplicateOrder   = "duplicate_order"
	ELimitReached     = "limit_reached"
	EAlreadyPaid      = "already_paid"
	EOrderClosed      = "order_closed"
	ENotStarted       = "not_started"
	EEnded            = "ended"
	ERateLimited      = "rate_limited"
	EBusy             = "busy"
	EUnavailable      = "unavailable"
	EInternal         = "internal"
	// The waiting room's refusals (package admission): a queue voucher's
	// order without a pass, with one that is not a live pass of this
	// buyer for this voucher, and a buyer or address on the deny list.
	EPassRequired = "pass_required"
	EPassInvalid  = "pass_invalid"
	EDenied       = "denied"
)

// ErrorCodes returns every error code above, so that what maps or
// documents them can be checked for completeness.
func ErrorCodes() []string {
	return []string{
		EInvalid, EUnauthorized, EForbidden, ENotFound, EMethodNotAllowed,
		ESoldOut, EDuplicateOrder, ELimitReached, EAlreadyPaid, EOrderClosed, ENotStarted, EEnded,
		ERateLimited, EBusy, EUnavailable, EInternal,
		EPassRequired, EPassInvalid, EDenied,
	}
}

// Error is an error meant for the caller of the service: a code from the
// list above and a message that is safe to show. Any other error is an
// internal one whose text is logged, not shown.
type Error struct {
	Code    string
	Message string
	// RetryAfter, when set, tells the caller when to try again
	// (ERateLimited, EBusy).
	RetryAfter time.Duration
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("flashsale: %s: %s", e.Code, e.Message)
}

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the *Error in err's chain, "" for nil and
// EInternal for any other error.
func ErrorCode(err error) string {
	switch e := find(err); {
	case err == nil:
		return ""
	case e != nil:
		return e.Code
	default:
		return EInternal
	}
}

// ErrorMessage returns the caller-safe message of err: the *Error's message,
// or a generic one for internal errors.
func ErrorMessage(err error) string {
	switch e := find(err); {
	case err == nil:
		return ""
	case e != nil:
		return e.Message
	default:
		return "internal error"
	}
}

// RetryAfter returns the retry hint of the *Error in err's chain, or 0.
func RetryAfter(err error) time.Duration {
	if e := find(err); e != nil {
		return e.RetryAfter
	}
	return 0
}

// find returns the *Error in err's chain, or nil. Most errors are one
// themselves: the type assertion answers them without errors.As, whose
// target escapes to the heap.
func find(err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
