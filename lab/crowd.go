package lab

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale"
)

// Crowd makes a sale's buyers people and bots (Sale.Crowd), who meet at
// a start Lead after the voucher's creation, on a voucher whose admission
// is open or a queue. The people are the Sale's Users (ids 1..Users), the
// bots Bots accounts after them, each sending at most BotRate requests
// per second. How each behaves: act, and docs/testing.md ("Bots and
// people").
type Crowd struct {
	Bots    int
	BotRate float64
	Lead    time.Duration
	// Admission is the voucher's admission, AdmissionOpen or
	// AdmissionQueue ("": none is sent, the servers' default, open);
	// AdmitPerSecond its admit_per_second with a queue.
	Admission      string
	AdmitPerSecond int
}

// The admissions of a voucher.
const (
	AdmissionOpen  = flashsale.AdmissionOpen
	AdmissionQueue = flashsale.AdmissionQueue
)

// How people behave: they arrive (or, admitted, click) within
// humanReaction of their cue, and a waiting-room page polls every
// humanPoll.
var (
	humanReaction = [2]time.Duration{200 * time.Millisecond, 2 * time.Second}
	humanPoll     = time.Second
)

// validate checks the crowd's settings.
func (c *Crowd) validate() error {
	switch {
	case c.Bots < 0 || !(c.BotRate > 0): // NaN too
		return fmt.Errorf("%w: bots must not be negative and their rate must be positive", ErrSetup)
	case c.Lead < 0:
		return fmt.Errorf("%w: the time before the start must not be negative", ErrSetup)
	case c.Admission != "" && c.Admission != AdmissionOpen && c.Admission != AdmissionQueue:
		return fmt.Errorf("%w: admission %q; want %q or %q", ErrSetup, c.Admission, AdmissionOpen, AdmissionQueue)
	case c.Admission == AdmissionQueue && c.AdmitPerSecond < 1:
		return fmt.Errorf("%w: a queue needs a positive admit_per_second", ErrSetup)
	}
	return nil
}

// queue reports whether the voucher's admission is a queue.
func (c *Crowd) queue() bool { return c.Admission == AdmissionQueue }

// crowdRun is one run of a Crowd against a sale's voucher.
type crowdRun struct {
	*Crowd
	sale           *Sale
	client         *http.Client
	orders, queues string // the voucher's order and queue paths
	token          func(int64) string
	begin          time.Time
	slots          chan struct{} // the Sale's Concurrency: requests in flight
	rec            *recorder     // the order requests
	sent           atomic.Int64  // order requests sent
	next           atomic.Uint64 // round robin over the targets
	q              queueTally
}

// runCrowd runs the sale's crowd from now, the voucher's creation, to
// end, audits it into row and measures its ceiling; see Run.
func (s *Sale) runCrowd(ctx context.Context, row Row, token func(int64) string, now, begin, end time.Time) (Row, error) {
	accounts := s.Users + s.Crowd.Bots
	client := NewClient(accounts, orDefault(s.Timeout, 30*time.Second))
	defer client.CloseIdleConnections()
	id := fmt.Sprint(row.VoucherID)
	c := &crowdRun{Crowd: s.Crowd, sale: s, client: client, token: token, begin: begin,
		orders: "/api/vouchers/" + id + "/orders", queues: "/api/vouchers/" + id + "/queue",
		slots: make(chan struct{}, max(s.Concurrency, 2)), rec: newRecorder(), q: newQueueTally()}
	c.rec.start = begin // the series run from the start
	actx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	for u := int64(1); u <= int64(accounts); u++ {
		rng := rand.New(rand.NewPCG(s.Seed, uint64(u)))
		wg.Go(func() {
			c.act(actx, u, rng, now)
			if actx.Err() != nil && ctx.Err() == nil {
				c.q.note(func(q *queueTally) { q.stranded++ })
			}
		})
	}
	wg.Wait()
	res := c.rec.result(int(c.sent.Load()), max(time.Since(begin), time.Millisecond))
	row.setLoad(res)
	row.Crowd = c.q.result(s.Users, c.Bots, c.Admission)
	if ctx.Err() != nil {
		return row, ctx.Err()
	}
	shots := make([]Shot, max(res.Requests, 1)) // the ceiling: as many requests
	for i := range shots {
		shots[i] = Shot{User: 1, Clicks: 1}
	}
	err := s.finish(ctx, client, &row, res, nil, shots)
	return row, errors.Join(err, c.q.transportError())
}

// act plays account u: a bot or a person, on an open or a queue voucher.
func (c *crowdRun) act(ctx context.Context, u int64, rng *rand.Rand, created time.Time) {
	// A bot sends one request at a time, at most BotRate a second, from
	// the start's first millisecond (open), or joins the queue as soon as
	// the voucher exists (a smart bot: everyone who joined before the
	// start is drawn in one random order), polls at BotRate and orders
	// the moment it is admitted (queueBot). A person arrives
	// humanReaction after the start and clicks once (a double click with
	// the Sale's Doubles chance), or joins the queue at a moment drawn
	// over the Lead and polls every humanPoll (queueHuman). Every request
	// carries X-Forwarded-For with an address of its account's own
	// (10.x.y.z): servers run with --trust-proxy apply their per-IP limit
	// per account, as to a bot farm behind residential proxies.
	bot := u > int64(c.sale.Users)
	switch {
	case bot && c.queue():
		c.queueBot(ctx, u)
	case bot:
		if sleepUntil(ctx, c.begin) == nil {
			c.every(ctx, c.botInterval(), func() bool { return settled(c.order(ctx, u, "", 1)) })
		}
	case c.queue():
		at := created.Add(time.Duration(rng.Int64N(int64(c.Lead) + 1)))
		c.queueHuman(ctx, u, rng, at)
	default:
		clicks := c.clicks(rng)
		if sleepUntil(ctx, c.begin.Add(reaction(rng))) == nil {
			c.every(ctx, humanPoll, func() bool { return settled(c.order(ctx, u, "", clicks)) })
		}
	}
}

// botInterval is the time between a bot's requests.
func (c *crowdRun) botInterval() time.Duration {
	return time.Duration(float64(time.Second) / c.BotRate)
}

// clicks draws whether a person's click is a double click.
func (c *crowdRun) clicks(rng *rand.Rand) int {
	if rng.Float64() < c.sale.Doubles {
		return 2
	}
	return 1
}

// reaction draws how long a person takes to act on a cue.
func reaction(rng *rand.Rand) time.Duration {
	return humanReaction[0] + time.Duration(rng.Int64N(int64(humanReaction[1]-humanReaction[0])))
}

// every calls step at most once per interval until it returns true or
// ctx ends. A step that took longer than interval is followed at once,
// with no burst to catch up.
func (c *crowdRun) every(ctx context.Context, interval time.Duration, step func() (done bool)) {
	for next := time.Now(); ctx.Err() == nil; {
		if step() {
			return
		}
		if next = next.Add(interval); next.Before(time.Now()) {
			next = time.Now()
		}
		if sleepUntil(ctx, next) != nil {
			return
		}
	}
}

// settled reports whether a click's answers end the buyer's trying: an
// order accepted, or a refusal trying again cannot change (sold out,
// ended, duplicate, a pass refused…); a transport error, rate_limited,
// not_started, busy or unavailable is tried again.
func settled(answers []answer) bool {
	for _, a := range answers {
		if a.err != nil {
			continue
		}
		switch a.code {
		case flashsale.ERateLimited, flashsale.ENotStarted, flashsale.EBusy, flashsale.EUnavailable:
		default:
			return true
		}
	}
	return false
}

// accepted returns the order id of the first accepted answer, or 0.
func accepted(answers []answer) int64 {
	for _, a := range answers {
		if a.err == nil && a.code == "" && a.orderID != 0 {
			return a.orderID
		}
	}
	return 0
}

// order sends clicks order requests of user u together (with the pass,
// when given) and records their answers.
func (c *crowdRun) order(ctx context.Context, u int64, pass string, clicks int) []answer {
	answers := make([]answer, clicks)
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i := range answers {
		req, err := c.request(ctx, http.MethodPost, c.orders, u)
		if err == nil && pass != "" {
			req.Header.Set(PassHeader, pass)
		}
		wg.Go(func() {
			<-release
			answers[i] = answer{user: u, units: 1, err: err}
			if err == nil {
				c.slot(ctx, func() { answers[i] = send(c.client, req, Shot{User: u, Clicks: clicks}, time.Time{}) })
			}
			if a := answers[i]; a.err == nil && a.code == "" && a.orderID == 0 {
				answers[i].err = errNoOrderID
			}
			if answers[i].err != nil && ctx.Err() != nil {
				return // the sale ended: not an answer
			}
			c.sent.Add(1)
			c.rec.add(answers[i])
			if pass != "" && answers[i].err == nil && answers[i].code == "" {
				c.q.spent(pass)
			}
		})
	}
	close(release)
	wg.Wait()
	return answers
}

// slot runs f holding one of the Sale's Concurrency slots.
func (c *crowdRun) slot(ctx context.Context, f func()) {
	if acquire(ctx, c.slots, 1) != nil {
		f() // ctx ended: f fails at once on the request's context
		return
	}
	defer func() { <-c.slots }()
	f()
}

// request builds a request of account u to the next target.
func (c *crowdRun) request(ctx context.Context, method, path string, u int64) (*http.Request, error) {
	target := c.sale.Targets[c.next.Add(1)%uint64(len(c.sale.Targets))]
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(target, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token(u))
	req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", byte(u>>16), byte(u>>8), byte(u)))
	return req, nil
}
