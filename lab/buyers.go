package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/httpapi"
)

// buyers act out what the buyers of a sale with a payment window do once
// an order of theirs is accepted, after a think time drawn from [0,
// window): pay it through the signed webhook (probability pay), cancel it
// (probability cancel), or leave it to expire. The fates follow a
// golden-ratio sequence from a random start, so even a short run of orders
// gets close to the shares asked for; a payment that arrives too late is
// refused order_closed (late), and its units are resold.
type buyers struct {
	ctx         context.Context // the sale's: a think time outlives the Load's
	client      *http.Client
	targets     []string
	token       func(user int64) string
	secret      []byte
	price       int64
	window      time.Duration
	pay, cancel float64

	wg      sync.WaitGroup
	mu      sync.Mutex
	rng     *rand.Rand
	fate    float64        // the golden-ratio sequence of fates, in [0, 1)
	next    int            // round robin over the targets
	acted   map[int64]bool // the orders a fate was drawn for
	holders map[int64]bool // the buyers who have had an order accepted
	paid    []int64        // the orders whose payment was answered 200
	out     Lifecycle      // what the buyers did
	samples []error
	ended   string // why the sale's waves stopped
}

// accepted draws the fate of an accepted order and, unless it is left to
// expire, has its buyer act on it after a think time. It does not block.
func (b *buyers) accepted(shot Shot, orderID int64) {
	b.mu.Lock()
	b.holders[shot.User] = true
	if b.acted[orderID] {
		b.mu.Unlock()
		return
	}
	b.acted[orderID] = true
	b.fate = math.Mod(b.fate+goldenRatio, 1)
	think := time.Duration(b.rng.Int64N(int64(b.window)))
	act := b.payOrder
	switch {
	case b.fate < b.pay:
	case b.fate < b.pay+b.cancel:
		act = b.cancelOrder
	default:
		b.out.Abandoned++
		act = nil
	}
	b.mu.Unlock()
	if act == nil {
		return
	}
	b.wg.Go(func() {
		if sleepUntil(b.ctx, time.Now().Add(think)) == nil {
			act(shot, orderID)
		}
	})
}

// goldenRatio is 1/φ: the steps of a sequence that spreads points the most
// evenly over [0, 1), whatever its length.
const goldenRatio = 0.6180339887498949

// payOrder sends the payment provider's webhook for the order.
func (b *buyers) payOrder(shot Shot, orderID int64) {
	id := strconv.FormatInt(orderID, 10)
	body, err := json.Marshal(map[string]any{"payment_id": "lab-" + id, "order_id": id, "amount": b.price * int64(shot.Units())})
	if err != nil {
		b.record("pay", "", err, nil)
		return
	}
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.target()+"/api/payments", bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(httpapi.SignatureHeader, httpapi.Sign(b.secret, body, time.Now()))
	}
	b.send("pay", req, err, func() {
		b.out.Payments++
		b.out.PaymentUnits += shot.Units()
		b.paid = append(b.paid, orderID)
	})
}

// cancelOrder cancels the order as its buyer.
func (b *buyers) cancelOrder(shot Shot, orderID int64) {
	req, err := http.NewRequestWithContext(b.ctx, http.MethodPost, b.target()+"/api/orders/"+strconv.FormatInt(orderID, 10)+"/cancel", nil)
	if err == nil {
		req.Header.Set("Authorization", "Bearer "+b.token(shot.User))
	}
	b.send("cancel", req, err, func() { b.out.Cancels++ })
}

// target returns the next target, round robin.
func (b *buyers) target() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	return strings.TrimSuffix(b.targets[b.next%len(b.targets)], "/")
}

// send sends req (unless building it failed with err) and records its
// answer; ok runs, under the lock, when it was accepted.
func (b *buyers) send(what string, req *http.Request, err error, ok func()) {
	code := ""
	if err == nil {
		var resp *http.Response
		if resp, err = b.client.Do(req); err == nil {
			_, code, err = readAnswer(resp)
		}
	}
	if b.ctx.Err() != nil {
		return // the sale was stopped: not an answer
	}
	b.record(what, code, err, ok)
}

// record counts an answer to a payment or a cancel: accepted (ok runs),
// refused as late (order_closed: past pay_by), refused otherwise, or left
// without an answer.
func (b *buyers) record(what, code string, err error, ok func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err != nil:
		b.out.Errors++
		if len(b.samples) < maxErrorSamples {
			b.samples = append(b.samples, err)
		}
	case code == "":
		ok()
	case code == flashsale.EOrderClosed:
		b.out.Late++
	default:
		b.out.Refused[what+" "+code]++
	}
}

// wait waits until every buyer who is thinking has acted.
func (b *buyers) wait() { b.wg.Wait() }

// paidUnits returns the units of the orders whose payment was answered 200.
func (b *buyers) paidUnits() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.out.PaymentUnits
}

// market returns the buyers among 1..users who have had no order
// accepted yet, ascending.
func (b *buyers) market(users int) []int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int64
	for u := int64(1); u <= int64(users); u++ {
		if !b.holders[u] {
			out = append(out, u)
		}
	}
	return out
}

// stop records why the waves stopped, and how many there were.
func (b *buyers) stop(why string, waves int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended, b.out.Waves = why, waves
}

// result returns what the buyers did and the orders they were told were
// paid; call it after wait.
func (b *buyers) result() (Lifecycle, []int64, []error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := b.out
	out.Ended = b.ended
	return out, append([]int64(nil), b.paid...), append([]error(nil), b.samples...)
}
