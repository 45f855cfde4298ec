package httpapi

import (
	"net/http"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/ratelimit"
)

// NoSniff sets X-Content-Type-Options: nosniff on every answer of h, so
// no browser reads a JSON answer (a voucher's title in it) as a page or a
// script.
func NoSniff(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// Wrong admin guesses allowed per client address: adminGuesses a
// second, in bursts of adminBurst. Only a wrong token spends them.
const (
	adminGuesses = 1.0
	adminBurst   = 10
)

// throttleAdmin spends one of the client address's wrong admin guesses,
// and refuses the request (ERateLimited) when none is left. Without a
// Limiter nothing is counted.
func (s *Server) throttleAdmin(r *http.Request) error {
	if s.Limiter == nil {
		return nil
	}
	wait, err := s.Limiter.Allow(r.Context(), ratelimit.Rule{Key: "admin-guess:" + s.clientIP(r), Rate: adminGuesses, Burst: adminBurst})
	if err != nil || wait <= 0 {
		return nil // a limiter down does not lock the admin out; the guess is still checked
	}
	return &flashsale.Error{Code: flashsale.ERateLimited, Message: "too many wrong admin tokens from this address; slow down", RetryAfter: max(wait, time.Second)}
}
