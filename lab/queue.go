package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// PassHeader is the header in which an order on a queue voucher carries
// its buyer's purchase pass.
const PassHeader = "Flashsale-Pass"

// The states of a queue ticket.
const (
	ticketWaiting  = "waiting"
	ticketAdmitted = "admitted"
	ticketSoldOut  = "sold_out"
	ticketExpired  = "expired"
)

// ticketBody is the union of the queue's answers: POST
// /api/vouchers/{id}/queue and GET /api/vouchers/{id}/queue/{ticket}, or
// the error shape.
type ticketBody struct {
	Ticket string `json:"ticket"`
	State  string `json:"state"`
	Pass   string `json:"pass"`
	Error  struct {
		Code string `json:"code"`
	} `json:"error"`
}

// queueBot plays bot u on a queue voucher: it joins at once, polls its
// ticket at BotRate, orders the moment it is admitted, and then tries its
// spent pass once more, as a bot after a second unit would.
func (c *crowdRun) queueBot(ctx context.Context, u int64) {
	interval := c.botInterval()
	ticket := c.joinQueue(ctx, u, interval)
	if ticket == "" {
		return
	}
	c.every(ctx, interval, func() bool {
		t, done := c.poll(ctx, u, ticket)
		if done || t.State != ticketAdmitted {
			return done
		}
		answers := c.order(ctx, u, t.Pass, 1)
		if accepted(answers) != 0 {
			c.order(ctx, u, t.Pass, 1)
			return true
		}
		return settled(answers)
	})
}

// queueHuman plays person u on a queue voucher: it joins at at, polls
// every humanPoll and, admitted, clicks humanReaction later with its
// pass (a double click sends the pass twice).
func (c *crowdRun) queueHuman(ctx context.Context, u int64, rng *rand.Rand, at time.Time) {
	clicks := c.clicks(rng)
	if sleepUntil(ctx, at) != nil {
		return
	}
	ticket := c.joinQueue(ctx, u, humanPoll)
	if ticket == "" {
		return
	}
	c.every(ctx, humanPoll, func() bool {
		t, done := c.poll(ctx, u, ticket)
		if done || t.State != ticketAdmitted {
			return done
		}
		if sleepUntil(ctx, time.Now().Add(reaction(rng))) != nil {
			return true
		}
		return settled(c.order(ctx, u, t.Pass, clicks))
	})
}

// joinQueue joins u to the queue, trying again every interval while the
// answer may change, and returns the ticket ("" when none was had).
func (c *crowdRun) joinQueue(ctx context.Context, u int64, interval time.Duration) string {
	var ticket string
	c.every(ctx, interval, func() bool {
		t, done := c.ask(ctx, http.MethodPost, c.queues, u)
		if done || t.Ticket == "" {
			return done
		}
		ticket = t.Ticket
		c.q.note(func(q *queueTally) { q.joins++ })
		return true
	})
	return ticket
}

// poll reads u's ticket. done says u stops waiting: sold out, expired,
// or refused for good.
func (c *crowdRun) poll(ctx context.Context, u int64, ticket string) (t ticketBody, done bool) {
	t, done = c.ask(ctx, http.MethodGet, c.queues+"/"+url.PathEscape(ticket), u)
	if done || t.State == "" {
		return t, done
	}
	c.q.note(func(q *queueTally) {
		q.polls++
		switch t.State {
		case ticketAdmitted:
			q.admitted[u] = true
		case ticketSoldOut:
			q.soldOut[u], done = true, true
		case ticketExpired:
			q.expired[u], done = true, true
		case ticketWaiting:
		default:
			q.refused["state "+t.State]++
			done = true
		}
	})
	if t.State == ticketAdmitted && t.Pass == "" {
		c.q.fail(fmt.Errorf("ticket %s of user %d admitted without a pass", ticket, u))
		return t, true
	}
	return t, done
}

// ask sends a queue request of u and reads its answer: t.State is empty
// when there is none to act on; done says a refusal trying again cannot
// change.
func (c *crowdRun) ask(ctx context.Context, method, path string, u int64) (t ticketBody, done bool) {
	req, err := c.request(ctx, method, path, u)
	if err != nil {
		c.q.fail(err)
		return t, true
	}
	var resp *http.Response
	c.slot(ctx, func() { resp, err = c.client.Do(req) })
	if err == nil {
		t, err = readTicket(resp)
	}
	switch {
	case ctx.Err() != nil:
		return ticketBody{}, true // the sale ended: not an answer
	case err != nil:
		c.q.fail(err)
		return ticketBody{}, false
	case t.Error.Code != "":
		c.q.note(func(q *queueTally) { q.refused[t.Error.Code]++ })
		return ticketBody{}, settled([]answer{{code: t.Error.Code}})
	}
	return t, false
}

// readTicket reads a queue answer to the end; a 2xx answer must name a
// state, any other an error code ("http_<status>" when it names none).
func readTicket(resp *http.Response) (t ticketBody, err error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return t, fmt.Errorf("reading the queue's answer: %w", err)
	}
	jsonErr := json.Unmarshal(body, &t)
	if resp.StatusCode/100 != 2 {
		if jsonErr != nil || t.Error.Code == "" {
			t = ticketBody{}
			t.Error.Code = "http_" + strconv.Itoa(resp.StatusCode)
		}
		return t, nil
	}
	if jsonErr != nil || t.State == "" {
		return t, fmt.Errorf("the queue answered %s with %q: no state", resp.Status, body)
	}
	return t, nil
}

// queueTally counts what the queue answered, across the crowd.
type queueTally struct {
	mu                         sync.Mutex
	joins, polls               int
	admitted, soldOut, expired map[int64]bool
	refused                    map[string]int
	errors                     int
	stranded                   int // accounts still trying when the sale ended
	samples                    []error
	passes                     map[string]int // orders accepted with each pass
}

func newQueueTally() queueTally {
	return queueTally{admitted: map[int64]bool{}, soldOut: map[int64]bool{}, expired: map[int64]bool{},
		refused: map[string]int{}, passes: map[string]int{}}
}

// note runs f under the tally's lock.
func (q *queueTally) note(f func(q *queueTally)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f(q)
}

// fail counts a queue request that got no usable answer.
func (q *queueTally) fail(err error) {
	q.note(func(q *queueTally) {
		q.errors++
		if len(q.samples) < maxErrorSamples {
			q.samples = append(q.samples, err)
		}
	})
}

// spent counts an order accepted with pass.
func (q *queueTally) spent(pass string) { q.note(func(q *queueTally) { q.passes[pass]++ }) }

// transportError reports the queue requests that got no usable answer.
func (q *queueTally) transportError() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.errors == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d queue requests got no usable answer; first: %w", ErrTransport, q.errors, q.samples[0])
}

// result returns the crowd's figures so far: the accounts, and what the
// queue answered (the units each side won are the audit's: count).
func (q *queueTally) result(humans, bots int, admission string) *CrowdResult {
	q.mu.Lock()
	defer q.mu.Unlock()
	r := &CrowdResult{Admission: admission, Humans: humans, Bots: bots, Joins: q.joins, Polls: q.polls,
		Admitted: len(q.admitted), SoldOutTickets: len(q.soldOut), ExpiredTickets: len(q.expired),
		QueueRefused: map[string]int{}, QueueErrors: q.errors, Stranded: q.stranded}
	if r.Admission == "" {
		r.Admission = AdmissionOpen
	}
	for k, v := range q.refused {
		r.QueueRefused[k] = v
	}
	for _, n := range q.passes {
		r.PassReused += max(0, n-1)
	}
	return r
}
