package admission

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
)

// Ticket states.
const (
	Waiting  = "waiting"
	Admitted = "admitted"
	SoldOut  = "sold_out"
	Expired  = "expired"
)

// Ticket is a buyer's place in a voucher's waiting room, as the API shows
// it: Position is 1 for the next to be admitted; Pass is set once
// admitted. A waiting ticket says what it can be promised (promise):
// UnitsAhead, the units still to be admitted (left, less the passes out
// and the orders being placed, as the last admission step counted them;
// absent before the first), and ETASeconds, or, for a position beyond
// them, null with ETAReason: ReasonPassesOut or ReasonBeyondUnits.
type Ticket struct {
	Ticket     string `json:"ticket"`
	State      string `json:"state"`
	Position   int64  `json:"position"`
	UnitsAhead *int64 `json:"units_ahead,omitempty"`
	ETASeconds *int64 `json:"eta_seconds"`
	ETAReason  string `json:"eta_reason,omitempty"`
	Pass       string `json:"pass,omitempty"`
}

// Why a waiting ticket has no ETA: its position is beyond the units still
// to be admitted, and it moves only when a pass out expires unused (or
// units come back: an order cancelled or expired), or, with no pass out,
// only when units come back.
const (
	ReasonPassesOut   = "passes_out"
	ReasonBeyondUnits = "beyond_units"
)

// promise sets a waiting ticket of 0-based rank's position, UnitsAhead
// and ETA, from the sale's begin and rate and the units still to be
// admitted and live passes the scripts read ("" units: no step yet).
func (t *Ticket) promise(now, begin time.Time, rank int64, rate int, units string, passes int64) {
	t.Position = rank + 1
	t.ETASeconds = new(eta(now, begin, rank, rate))
	ahead, err := strconv.ParseInt(units, 10, 64)
	if err != nil {
		return
	}
	t.UnitsAhead = &ahead
	switch {
	case rank < ahead:
	case passes > 0:
		t.ETASeconds, t.ETAReason = nil, ReasonPassesOut
	default:
		t.ETASeconds, t.ETAReason = nil, ReasonBeyondUnits
	}
}

// Join puts the user in the voucher's waiting room, or returns the ticket
// the user holds there (waiting, or admitted with a live pass). It returns
// ENotFound, EInvalid for an open voucher and EEnded once the sale ended.
func (q *Queue) Join(ctx context.Context, voucherID, userID int64) (*Ticket, error) {
	c, err := q.voucher(ctx, voucherID)
	if err != nil {
		return nil, err
	}
	switch {
	case !c.queued:
		return nil, flashsale.Errorf(flashsale.EInvalid, "voucher %d has no waiting room: order directly", voucherID)
	case !time.Now().Before(c.end):
		return nil, flashsale.Errorf(flashsale.EEnded, "the sale has ended")
	}
	if err := q.register(ctx, voucherID); err != nil {
		return nil, err
	}
	r := q.keys.room(voucherID)
	user := strconv.FormatInt(userID, 10)
	jc := &call{ctx: ctx, args: []string{user, strconv.FormatInt(rand.Int64N(1<<52), 10)}}
	if err := q.batched("j"+r.meta, joinScript, []string{r.waiting, r.passes, r.meta},
		[]string{ms(c.begin), strconv.Itoa(c.rate)}, 3, jc); err != nil {
		return nil, unavailable("join", err)
	}
	res := jc.reply
	round, _ := jc.head[0].ToString()
	units, _ := jc.head[1].ToString()
	passes, _ := jc.head[2].AsInt64()
	state, _ := res[0].ToString()
	score, _ := res[1].ToString()
	rank, _ := res[2].AsInt64()
	t := &Ticket{Ticket: q.sign("t", voucherID, user, score, round), State: state, ETASeconds: new(int64(0))}
	if state == Admitted {
		rec, _ := res[3].ToString()
		t.Pass = q.passToken(voucherID, user, rec)
		return t, nil
	}
	t.promise(time.Now(), c.begin, rank, c.rate, units, passes)
	return t, nil
}

// register adds the voucher to the rooms Run admits: again after
// reRegister, since a Redis that lost its data (or failed over to a
// replica that missed the add) would otherwise never admit new joiners.
func (q *Queue) register(ctx context.Context, voucherID int64) error {
	if at, ok := q.registered.Load(voucherID); ok && time.Since(at.(time.Time)) < reRegister {
		return nil
	}
	cmd := q.client.B().Sadd().Key(q.keys.rooms()).Member(strconv.FormatInt(voucherID, 10)).Build()
	if err := q.client.Do(ctx, cmd).Error(); err != nil {
		return unavailable("register", err)
	}
	q.registered.Store(voucherID, time.Now())
	return nil
}

// reRegister is how long a process trusts its add to the rooms set.
const reRegister = 5 * time.Second

// Poll returns the state of the user's ticket. It reads Redis only. A
// ticket that is not the user's (or not a ticket) is ENotFound.
func (q *Queue) Poll(ctx context.Context, voucherID, userID int64, ticket string) (*Ticket, error) {
	f, ok := q.open("t", voucherID, ticket, 3)
	if !ok || f[0] != strconv.FormatInt(userID, 10) {
		return nil, flashsale.Errorf(flashsale.ENotFound, "no such ticket for voucher %d", voucherID)
	}
	if q.final.has(voucherID, ticket) {
		return &Ticket{Ticket: ticket, State: SoldOut, ETASeconds: new(int64(0))}, nil
	}
	r := q.keys.room(voucherID)
	c := &call{ctx: ctx, args: f}
	if err := q.batched("p"+r.meta, pollScript, []string{r.waiting, r.passes, r.done, r.meta}, nil, 4, c); err != nil {
		return nil, unavailable("poll", err)
	}
	rate, _ := c.head[0].AsInt64()
	begin, _ := c.head[1].AsInt64()
	units, _ := c.head[2].ToString()
	passes, _ := c.head[3].AsInt64()
	state, _ := c.reply[0].ToString()
	rank, _ := c.reply[1].AsInt64()
	rec, _ := c.reply[2].ToString()
	t := &Ticket{Ticket: ticket, State: state, ETASeconds: new(int64(0))}
	switch state {
	case Waiting:
		t.promise(time.Now(), time.UnixMilli(begin), rank, int(rate), units, passes)
	case Admitted:
		t.Pass = q.passToken(voucherID, f[0], rec)
	case SoldOut:
		q.final.add(voucherID, ticket)
	}
	return t, nil
}

// eta estimates the whole seconds until the ticket of 0-based rank is
// admitted: the wait for the sale to begin, then its turn at rate.
func eta(now, begin time.Time, rank int64, rate int) int64 {
	s := max(0, begin.Sub(now).Seconds())
	if rate > 0 {
		s += float64(rank+1) / float64(rate)
	}
	return int64(math.Ceil(s))
}

// soldOut is the tickets this process saw read sold_out, which is final:
// their polls are answered from memory, as the async gate answers a
// sold-out voucher's orders, so a sold-out room's pollers cost Redis one
// poll each per instance.
type soldOut struct {
	mu      sync.RWMutex
	tickets map[string]struct{} // voucher id "/" ticket
}

// maxSoldOut bounds the tickets kept; a full set starts over.
const maxSoldOut = 200_000

func (s *soldOut) has(voucherID int64, ticket string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.tickets[strconv.FormatInt(voucherID, 10)+"/"+ticket]
	return ok
}

func (s *soldOut) add(voucherID int64, ticket string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tickets == nil || len(s.tickets) >= maxSoldOut {
		s.tickets = map[string]struct{}{}
	}
	s.tickets[strconv.FormatInt(voucherID, 10)+"/"+ticket] = struct{}{}
}
