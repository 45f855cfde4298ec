package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Load sends a plan's shots to servers and records every answer: the load
// generator of a Sale, and of its calibration on GET /healthz. Closed
// model (Rate 0): Concurrency requests in flight at all times, latency
// from the send. Open model: Rate requests per second on a fixed
// schedule, latency from the scheduled time, so a stalling server cannot
// hide its stall by slowing the load (coordinated omission). A
// double-click shot's clicks are released together, on connections of
// their own, as a double click or a bot sends them.
type Load struct {
	// Targets are the servers' base URLs. Requests go to them round robin,
	// one request each, as a load balancer does.
	Targets []string
	Shots   []Shot
	// More, when set, is asked for the next wave of shots once every shot
	// before it was sent (not answered); nil or none ends the run. The open
	// model's schedule starts again with each wave, so a pause More takes
	// between waves is not counted as latency.
	More func(ctx context.Context) []Shot
	// NewRequest builds one request of the shot for target; see
	// OrderRequest and HealthzRequest.
	NewRequest func(ctx context.Context, target string, shot Shot) (*http.Request, error)
	// Accepted, when set, is told of every accepted answer that names an
	// order, after it is recorded, on the request's goroutine: it must
	// not block.
	Accepted func(shot Shot, orderID int64)
	// Concurrency bounds the requests in flight; at least 2 when a shot is
	// a double click.
	Concurrency int
	// Rate, when positive, selects the open model: requests per second.
	Rate float64
	// Client sends the requests (default: NewClient(Concurrency)).
	Client *http.Client
	// Progress is told about every answered request (default: none).
	Progress Progress
	// Orders says the requests are order attempts: an accepted answer
	// that names no order id then counts as an error, since its order
	// could not be checked for loss.
	Orders bool
	// Unreachable, when positive, stops the run with ErrUnreachable once
	// a target's requests have failed without an answer for this long
	// (since its last answer, or the start): a dead server would
	// otherwise take every remaining request as a quick error.
	Unreachable time.Duration
}

// errNoOrderID is the error of an accepted order answer without an id.
var errNoOrderID = errors.New("lab: an accepted answer names no order id")

// NewClient returns an HTTP client that keeps up to concurrency idle
// connections per server, so a run reuses its connections instead of
// exhausting ephemeral ports, and gives up on a request after timeout.
func NewClient(concurrency int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil, // the lab talks to the servers directly
			MaxIdleConns:        0,
			MaxIdleConnsPerHost: concurrency,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}

func (l *Load) validate() error {
	switch {
	case len(l.Targets) == 0:
		return errors.New("lab: no targets")
	case l.NewRequest == nil:
		return errors.New("lab: NewRequest is required")
	case l.Concurrency <= 0:
		return fmt.Errorf("lab: concurrency must be positive, got %d", l.Concurrency)
	case l.Rate < 0:
		return fmt.Errorf("lab: rate must not be negative, got %g", l.Rate)
	}
	return l.validateShots(l.Shots)
}

// validateShots checks shots' clicks.
func (l *Load) validateShots(shots []Shot) error {
	for _, s := range shots {
		if s.Clicks < 1 || s.Clicks > 2 {
			return fmt.Errorf("lab: a shot has %d clicks; want 1 or 2", s.Clicks)
		}
		if s.Clicks > l.Concurrency {
			return fmt.Errorf("lab: double clicks need a concurrency of at least 2, got %d", l.Concurrency)
		}
	}
	return nil
}

// Run sends every shot, and every wave More gives, and waits for the
// answers. It stops sending when ctx ends and returns what was answered so
// far with ctx's error.
func (l *Load) Run(ctx context.Context) (*Result, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &run{Load: l, ctx: ctx, cancel: cancel, client: l.Client, progress: l.Progress, rec: newRecorder(),
		slots: make(chan struct{}, l.Concurrency), start: time.Now(), lastAnswer: map[string]time.Time{}}
	if r.client == nil {
		r.client = NewClient(l.Concurrency, 30*time.Second)
		defer r.client.CloseIdleConnections()
	}
	if r.progress == nil {
		r.progress = nopProgress{}
	}
	sent := 0
	var err error
	for shots := l.Shots; len(shots) > 0; {
		sent += r.wave(shots, sent)
		if l.More == nil || ctx.Err() != nil {
			break
		}
		shots = l.More(ctx)
		if err = l.validateShots(shots); err != nil {
			break
		}
		if g, ok := r.progress.(interface{ Grow(n int) }); ok {
			g.Grow(countRequests(shots))
		}
	}
	r.wg.Wait()
	res := r.rec.result(sent, time.Since(r.start))
	if ctx.Err() != nil {
		return res, context.Cause(ctx)
	}
	return res, err
}

// wave sends shots, the first of them the seq-th request of the run, on
// the open model's schedule from now, and returns how many requests it
// sent; it stops when the run's context ends.
func (r *run) wave(shots []Shot, seq int) int {
	var interval time.Duration
	if r.Rate > 0 {
		interval = time.Duration(float64(time.Second) / r.Rate)
	}
	start := time.Now()
	sent := 0
	for _, shot := range shots {
		var due time.Time // the open model's scheduled send time
		if r.Rate > 0 {
			due = start.Add(time.Duration(sent) * interval)
			if err := sleepUntil(r.ctx, due); err != nil {
				break
			}
		}
		if err := acquire(r.ctx, r.slots, shot.Clicks); err != nil {
			break
		}
		r.fire(shot, due, seq+sent)
		sent += shot.Clicks
	}
	return sent
}

// run is one Run of a Load.
type run struct {
	*Load
	ctx      context.Context
	client   *http.Client
	progress Progress
	rec      *recorder
	slots    chan struct{} // one per request in flight
	wg       sync.WaitGroup
	// cancel stops the run with ErrUnreachable; lastAnswer is when each
	// target last answered.
	cancel     context.CancelCauseFunc
	start      time.Time
	mu         sync.Mutex
	lastAnswer map[string]time.Time
}

// watch notes a target's answer, or stops the run when the target has
// answered nothing for Unreachable and its requests fail.
func (r *run) watch(target string, a answer) {
	if r.Unreachable <= 0 || !a.sent {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.answered {
		r.lastAnswer[target] = now
		return
	}
	since, ok := r.lastAnswer[target]
	if !ok {
		since = r.start
	}
	if silent := now.Sub(since); silent >= r.Unreachable {
		r.cancel(fmt.Errorf("%w: %s gave no answer for %s; the last request failed with: %w", ErrUnreachable, target, silent.Round(100*time.Millisecond), a.err))
	}
}

// fire sends the clicks of one shot, the seq-th request of the run first,
// and releases them together once all are built; each gives its slot
// back when answered.
func (r *run) fire(shot Shot, due time.Time, seq int) {
	var ready sync.WaitGroup
	release := make(chan struct{})
	for i := range shot.Clicks {
		target := r.Targets[(seq+i)%len(r.Targets)]
		ready.Add(1)
		r.wg.Go(func() {
			defer func() { <-r.slots }()
			req, err := r.NewRequest(r.ctx, target, shot)
			ready.Done()
			<-release
			a := answer{user: shot.User, units: shot.Units(), err: err}
			if err == nil {
				a = send(r.client, req, shot, due)
			}
			if r.Orders && a.err == nil && a.code == "" && a.orderID == 0 {
				a.err = errNoOrderID
			}
			r.watch(target, a)
			r.rec.add(a)
			if r.Accepted != nil && a.err == nil && a.code == "" && a.orderID != 0 {
				r.Accepted(shot, a.orderID)
			}
			r.progress.Add(1)
		})
	}
	ready.Wait()
	close(release)
}

// send sends req and reads its answer. Latency runs from due, or from now
// when due is zero.
func send(client *http.Client, req *http.Request, shot Shot, due time.Time) answer {
	from := due
	if from.IsZero() {
		from = time.Now()
	}
	a := answer{user: shot.User, units: shot.Units(), sent: true}
	resp, err := client.Do(req)
	if err != nil {
		a.err = err
		a.latency = time.Since(from) // a timeout still took this long
		return a
	}
	a.answered = true
	a.orderID, a.code, a.err = readAnswer(resp)
	a.latency = time.Since(from)
	return a
}

// acquire takes n slots, or returns ctx's error.
func acquire(ctx context.Context, slots chan struct{}, n int) error {
	for range n {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// sleepUntil waits until t, or returns ctx's error.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
