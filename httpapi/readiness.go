package httpapi

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// readyFor is how long a readiness check's answer is reused: however
// many clients ask, Ready runs at most once per readyFor per instance.
const readyFor = time.Second

// readyCache holds the last answer of Ready; one check runs at a time,
// and callers meanwhile wait for it.
type readyCache struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// check returns Ready's answer of the last readyFor, running it when
// there is none.
func (c *readyCache) check(ctx context.Context, ready ReadyFunc) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < readyFor {
		return c.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_, c.err = ready(ctx)
	c.at = time.Now()
	return c.err
}

// readyz answers 200 {"status":"ready"} when Redis and the database
// answer, else 503 with the error shape; the cause goes to the log, not
// to whoever asked (it may name internal addresses).
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.Ready == nil {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
		return
	}
	if err := s.ready.check(r.Context(), s.Ready); err != nil {
		s.Logger.WarnContext(r.Context(), "not ready", "err", err)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable",
			"error": map[string]string{"code": flashsale.EUnavailable, "message": "a dependency (Redis or the database) does not answer"}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
}
