package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"

	"github.com/flashsale/flashsale"
)

// statuses maps every error code to its HTTP status: the one place where
// the domain's errors meet HTTP.
var statuses = map[string]int{
	flashsale.EInvalid:          http.StatusBadRequest,
	flashsale.EUnauthorized:     http.StatusUnauthorized,
	flashsale.EForbidden:        http.StatusForbidden,
	flashsale.ENotFound:         http.StatusNotFound,
	flashsale.EMethodNotAllowed: http.StatusMethodNotAllowed,
	flashsale.ESoldOut:          http.StatusConflict,
	flashsale.EDuplicateOrder:   http.StatusConflict,
	flashsale.ELimitReached:     http.StatusConflict,
	flashsale.EAlreadyPaid:      http.StatusConflict,
	flashsale.EOrderClosed:      http.StatusConflict,
	flashsale.ENotStarted:       http.StatusConflict,
	flashsale.EEnded:            http.StatusConflict,
	flashsale.ERateLimited:      http.StatusTooManyRequests,
	flashsale.EBusy:             http.StatusServiceUnavailable,
	flashsale.EUnavailable:      http.StatusServiceUnavailable,
	flashsale.EInternal:         http.StatusInternalServerError,
	flashsale.EPassRequired:     http.StatusForbidden,
	flashsale.EPassInvalid:      http.StatusForbidden,
	flashsale.EDenied:           http.StatusForbidden,
}

// ErrorStatus returns the HTTP status for an error code.
func ErrorStatus(code string) int {
	if s, ok := statuses[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorBody is the JSON shape of every error response:
// {"error": {"code": "...", "message": "..."}}.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError writes err in the error shape with its status, and a
// Retry-After header (whole seconds, at least 1) when the error has a retry
// hint. Internal errors are logged with their text and shown generically;
// a request its client gave up on is no server error, and is logged at
// debug level only.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	code := flashsale.ErrorCode(err)
	switch {
	case code != flashsale.EInternal && code != flashsale.EUnavailable:
	case r.Context().Err() != nil && errors.Is(err, context.Canceled):
		log.DebugContext(r.Context(), "request abandoned by its client", "method", r.Method, "path", r.URL.Path, "err", err)
	default:
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if d := flashsale.RetryAfter(err); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
	}
	writeJSON(w, ErrorStatus(code), errorBody(code, flashsale.ErrorMessage(err)))
}

func errorBody(code, message string) ErrorBody {
	var body ErrorBody
	body.Error.Code = code
	body.Error.Message = message
	return body
}

// writeJSON writes v as the JSON response body with the status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away; nothing to do
}
