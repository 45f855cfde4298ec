// Package httpapi serves the flash-sale JSON API over net/http: vouchers,
// orders, liveness and readiness, with bearer-token auth and per-user and
// per-IP rate limits on the order route.
package httpapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/auth"
	"github.com/flashsale/flashsale/ratelimit"
)

// Limiter spends one request from each rule and says how long to wait when
// one refuses. *ratelimit.Limiter implements it.
type Limiter interface {
	Allow(ctx context.Context, rules ...ratelimit.Rule) (time.Duration, error)
}

var _ Limiter = (*ratelimit.Limiter)(nil)

// ReadyFunc reports whether the service's dependencies answer. /readyz
// shows neither its details nor its error (they are logged): anyone may
// call it.
type ReadyFunc func(ctx context.Context) (details map[string]any, err error)

// Server holds what the handlers need. Vouchers, Orders and Auth are
// required; the rest is optional.
type Server struct {
	Vouchers flashsale.VoucherService
	Orders   flashsale.OrderService
	Auth     *auth.Authenticator
	// Limiter with UserRate and IPRate (requests per second; 0 disables a
	// limit) guard the order route. Bursts of up to one second's worth are
	// allowed.
	Limiter  Limiter
	UserRate float64
	IPRate   float64
	// TrustProxy takes the client IP from the last X-Forwarded-For entry
	// (of the last header line), as set by a reverse proxy in front of the
	// service: one hop is trusted, so with two proxies in a row the entry
	// is the first proxy's address. Without it, and when that entry is
	// not an address, the connection's peer. The per-IP limit counts IPv6
	// clients by their /64.
	TrustProxy bool
	Ready      ReadyFunc
	Logger     *slog.Logger
	// PaymentSecret is the key the payment provider signs its webhook
	// with; without it POST /api/payments answers unavailable.
	PaymentSecret []byte
	// Now is the clock the webhook's signature timestamp is checked
	// against (default time.Now).
	Now func() time.Time
	// Admission is the waiting room and the deny list; without it the
	// queue and deny list routes answer unavailable, and nobody is denied.
	Admission Admission
	// Events is the event outbox and webhooks; without it their routes
	// answer unavailable.
	Events Events

	ready   readyCache // readiness.go
	guesses guessBlock // guesses.go
}

// now returns the server's time.
func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Handler returns the API's routes.
func (s *Server) Handler() http.Handler {
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		mux.HandleFunc(rt.method+" "+rt.pattern, rt.handle)
	}
	return NoSniff(s.recoverPanics(s.jsonMisses(mux)))
}

// route is one operation of the API.
type route struct {
	method, pattern string
	handle          http.HandlerFunc
}

// routes lists the API's operations: Handler registers them, and a test
// checks that openapi.json describes each of them.
func (s *Server) routes() []route {
	return []route{
		{"GET", "/healthz", s.healthz},
		{"GET", "/readyz", s.readyz},
		{"GET", "/openapi.json", s.openAPI},
		{"POST", "/api/vouchers", s.createVoucher},
		{"GET", "/api/vouchers", s.listVouchers},
		{"GET", "/api/vouchers/{id}", s.getVoucher},
		{"POST", "/api/vouchers/{id}/orders", s.placeOrder},
		{"GET", "/api/orders/{id}", s.getOrder},
		{"POST", "/api/orders/{id}/cancel", s.cancelOrder},
		{"POST", "/api/payments", s.payment},
		{"POST", "/api/vouchers/{id}/queue", s.joinQueue},
		{"GET", "/api/vouchers/{id}/queue/{ticket}", s.pollQueue},
		{"PUT", "/api/denylist", s.putDenyList},
		{"GET", "/api/denylist", s.getDenyList},
		{"GET", "/api/buyers/{id}", s.getBuyer},
		{"GET", "/api/events", s.listEvents},
		{"POST", "/api/webhooks", s.createWebhook},
		{"GET", "/api/webhooks", s.listWebhooks},
		{"DELETE", "/api/webhooks/{id}", s.deleteWebhook},
		{"POST", "/api/webhooks/{id}/redeliver", s.redeliverWebhook},
		{"GET", "/api/webhooks/{id}/dead-letters", s.listDeadLetters},
	}
}

// jsonMisses answers requests that match no route in the JSON error shape:
// 404 for an unknown path, 405 (with Allow) for a known path and the wrong
// method, as the mux decides.
func (s *Server) jsonMisses(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r) // sets the path values h reads
			return
		}
		probe := &statusProbe{header: http.Header{}}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			allow := probe.header.Get("Allow")
			w.Header().Set("Allow", allow)
			s.fail(w, r, flashsale.Errorf(flashsale.EMethodNotAllowed, "method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
			return
		}
		s.fail(w, r, flashsale.Errorf(flashsale.ENotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
}

// statusProbe records the status a handler would answer with and drops
// the body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	writeError(w, r, s.Logger, err)
}

// recoverPanics turns a handler panic into a logged 500 instead of a
// dropped connection.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.Logger.ErrorContext(r.Context(), "handler panic", "method", r.Method, "path", r.URL.Path, "panic", v)
				s.fail(w, r, flashsale.Errorf(flashsale.EInternal, "internal error"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// healthz answers liveness without touching Redis or the database, so it
// is also the floor cost of one HTTP request.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

// MaxTokenBytes bounds a bearer token: a longer one is refused before
// anything parses it (ours are a few hundred bytes).
const MaxTokenBytes = 4 << 10

// bearer returns the request's bearer token.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if len(h) > MaxTokenBytes+len("Bearer ") {
		return "", flashsale.Errorf(flashsale.EUnauthorized, "the Authorization header is longer than a token may be (%d bytes)", MaxTokenBytes)
	}
	return auth.BearerToken(h)
}

// user authenticates the request as a user and returns the user id.
func (s *Server) user(r *http.Request) (int64, error) {
	tok, err := bearer(r)
	if err != nil {
		return 0, err
	}
	return s.Auth.UserContext(r.Context(), tok)
}

// admin checks for the admin token: EUnauthorized without a valid token,
// EForbidden with a valid user token.
func (s *Server) admin(r *http.Request) error {
	tok, err := bearer(r)
	if err != nil {
		return err
	}
	if err := s.guessBlocked(r); err != nil {
		return err
	}
	if s.Auth.IsAdmin(tok) {
		return nil
	}
	if err := s.throttleAdmin(r); err != nil {
		return err
	}
	if _, err := s.Auth.UserContext(r.Context(), tok); err != nil {
		return err
	}
	return flashsale.Errorf(flashsale.EForbidden, "this route needs the admin token")
}

// limit applies the per-user and per-IP budgets of the order route.
func (s *Server) limit(r *http.Request, userID int64) error {
	if s.Limiter == nil || (s.UserRate <= 0 && s.IPRate <= 0) {
		return nil
	}
	wait, err := s.Limiter.Allow(r.Context(),
		ratelimit.Rule{Key: "user:" + formatID(userID), Rate: s.UserRate, Burst: int(max(1, s.UserRate))},
		ratelimit.Rule{Key: "ip:" + s.clientIP(r), Rate: s.IPRate, Burst: int(max(1, s.IPRate))},
	)
	if err != nil {
		return fmt.Errorf("%w: %w", &flashsale.Error{Code: flashsale.EUnavailable, Message: "the rate limiter is unavailable; try again shortly", RetryAfter: time.Second}, err)
	}
	if wait > 0 {
		return &flashsale.Error{Code: flashsale.ERateLimited, Message: "too many requests; slow down", RetryAfter: wait}
	}
	return nil
}

// clientIP returns the key the per-IP rate limit counts a request under:
// the client's IPv4 address, or the /64 of its IPv6 address, since one
// IPv6 client usually holds a whole /64 and could otherwise rotate through
// it for a fresh budget per address.
func (s *Server) clientIP(r *http.Request) string {
	ip, raw := s.clientAddr(r)
	if !ip.IsValid() {
		return raw
	}
	if ip.Is6() {
		return netip.PrefixFrom(ip.WithZone(""), 64).Masked().String()
	}
	return ip.String()
}

// clientAddr returns the client's address (unmapped; invalid when it
// does not parse) and the text it was read from.
func (s *Server) clientAddr(r *http.Request) (netip.Addr, string) {
	if s.TrustProxy {
		// The last entry of the last header line is what the proxy in
		// front of us added; entries before it come from the client, and
		// some proxies add a line of their own rather than extend the
		// client's, so only the last line can be trusted. An entry that
		// is not an address counts as none: the peer's is used, so junk
		// in the header buys no fresh budget per value.
		if lines := r.Header.Values("X-Forwarded-For"); len(lines) > 0 {
			last := lines[len(lines)-1]
			entry := strings.TrimSpace(last[strings.LastIndexByte(last, ',')+1:])
			if ip, ok := parseAddr(entry); ok {
				return ip, entry
			}
		}
	}
	addr := r.RemoteAddr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	ip, _ := parseAddr(addr)
	return ip, addr
}

// parseAddr parses an address, with a port or without (some proxies
// write the client's port too), unmapped.
func parseAddr(s string) (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		ip = ap.Addr()
	}
	return ip.Unmap(), true
}
