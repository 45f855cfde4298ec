package httpapi

import (
	"net/http"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/ratelimit"
)

// Wrong admin guesses allowed per client address: adminGuesses a
// second, in bursts of adminBurst, counted in Redis across instances.
const (
	adminGuesses = 1.0
	adminBurst   = 10
)

// guessBlock is the addresses whose wrong admin guesses ran out, until
// when: while blocked, no admin token from there is even compared, so a
// right guess gains nothing either. Kept per instance; the budget itself
// is Redis's, shared by the instances.
type guessBlock struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// blocked returns how long ip stays blocked (0: not).
func (g *guessBlock) blocked(ip string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return time.Until(g.until[ip])
}

// block blocks ip for d, dropping the blocks that ended once the map
// grows large (many addresses guessing).
func (g *guessBlock) block(ip string, d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.until == nil {
		g.until = map[string]time.Time{}
	}
	if len(g.until) >= 10000 {
		for k, t := range g.until {
			if time.Now().After(t) {
				delete(g.until, k)
			}
		}
	}
	g.until[ip] = time.Now().Add(d)
}

// guessBlocked is ERateLimited while the request's address is blocked.
func (s *Server) guessBlocked(r *http.Request) error {
	if wait := s.guesses.blocked(s.clientIP(r)); wait > 0 {
		return tooManyGuesses(wait)
	}
	return nil
}

// throttleAdmin spends one of the client address's wrong admin guesses;
// when none is left it blocks the address and returns ERateLimited.
// Without a Limiter, or with it down, nothing is counted.
func (s *Server) throttleAdmin(r *http.Request) error {
	if s.Limiter == nil {
		return nil
	}
	ip := s.clientIP(r)
	wait, err := s.Limiter.Allow(r.Context(), ratelimit.Rule{Key: "admin-guess:" + ip, Rate: adminGuesses, Burst: adminBurst})
	if err != nil || wait <= 0 {
		return nil
	}
	s.guesses.block(ip, wait)
	return tooManyGuesses(wait)
}

func tooManyGuesses(wait time.Duration) error {
	return &flashsale.Error{Code: flashsale.ERateLimited, Message: "too many wrong admin tokens from this address; slow down", RetryAfter: max(wait, time.Second)}
}

// IsAdmin reports whether r carries the admin token, for pages that show
// the admin more than anyone (the dashboard's stats). A token that is
// neither the admin's nor a user's spends one of the address's wrong
// guesses, as on the admin routes, and a blocked address is never admin.
func (s *Server) IsAdmin(r *http.Request) bool {
	tok, err := bearer(r)
	if err != nil || s.guessBlocked(r) != nil {
		return false
	}
	if s.Auth.IsAdmin(tok) {
		return true
	}
	if _, err := s.Auth.User(tok); err != nil {
		_ = s.throttleAdmin(r)
	}
	return false
}
