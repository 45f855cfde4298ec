package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Route is the pattern /metrics is served on.
const Route = "GET /metrics"

// OrderRoute is the mux pattern of the order route, as httpapi registers
// it.
const OrderRoute = "POST /api/vouchers/{id}/orders"

// noteKey keys the note a request carries through the handlers.
type noteKey struct{}

// note tells the middleware whether the order decorator counted the
// request's order, payment or cancel.
type note struct{ counted bool }

// Middleware counts and times every request by route: the pattern the
// mux matched (r.Pattern, which net/http's ServeMux sets on the request it
// was given), or "unmatched". An order request refused before it reached
// the order service (rate limited, unauthenticated, a malformed id) is
// counted in flashsale_orders_total here, by its status; so is a payment
// or a cancel (a bad signature, a malformed id) in theirs.
func (m *Metrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		n := &note{}
		r = r.WithContext(context.WithValue(r.Context(), noteKey{}, n))
		sw := NewStatusRecorder(w)
		next.ServeHTTP(sw, r)
		took := time.Since(start)
		route := r.Pattern
		if route == "" || route == "/" { // "/" is the catch-all the API is mounted on
			route = "unmatched"
		}
		m.httpRequests.WithLabelValues(route, strconv.Itoa(sw.Status)).Inc()
		m.httpDuration.WithLabelValues(route).Observe(took.Seconds())
		if route == PaymentRoute || route == CancelRoute {
			if !n.counted {
				m.countLife(route, sw.Status)
			}
			return
		}
		if route != OrderRoute {
			return
		}
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64) // 0 for a malformed id: not kept per voucher
		m.live.Latency(id, took)
		if !n.counted {
			m.countOrder(id, statusOutcome(sw.Status))
		}
	})
}

// statusOutcome names the outcome of an order request the order service
// never saw, from its status. On the order route the one 403 it does not
// see is the deny list's (httpapi checks it first; a pass is checked
// inside the service).
func statusOutcome(status int) string {
	switch status {
	case http.StatusForbidden:
		return "denied"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusServiceUnavailable:
		return "unavailable"
	case http.StatusInternalServerError:
		return "internal"
	}
	return "invalid"
}

// StatusRecorder is an http.ResponseWriter that remembers the status it
// answered (200 unless the handler wrote another first).
type StatusRecorder struct {
	http.ResponseWriter
	Status int
	wrote  bool
}

// NewStatusRecorder wraps w.
func NewStatusRecorder(w http.ResponseWriter) *StatusRecorder {
	return &StatusRecorder{ResponseWriter: w, Status: http.StatusOK}
}

// WriteHeader records the first status written.
func (w *StatusRecorder) WriteHeader(status int) {
	if !w.wrote {
		w.Status, w.wrote = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write marks the status as written.
func (w *StatusRecorder) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }
