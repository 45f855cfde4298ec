package async

import (
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// Gate results, as gate.lua returns them.
const (
	gateAccepted = iota
	gateNotLoaded
	gateNotStarted
	gateEnded
	gateSoldOut
	gateDuplicate
	gateLimitReached
	gateKeyPlaced
	gateBadQuantity
)

// gateHead is what gate.lua tells every order of a batch: the voucher's
// (or shard's) state when the batch was decided.
type gateHead struct {
	given, initial, loaded, returned int64 // units and µs, as the meta hash holds them
	payBy                            int64 // µs since 1970, 0 without a payment window
	window                           int64 // the payment window, µs
}

// gateReply is gate.lua's decision on one order.
type gateReply struct {
	code int64 // gateAccepted, … gateBadQuantity
	head *gateHead

	left  int64  // gateAccepted: units left after this order
	entry string // gateAccepted and gateKeyPlaced: the order's stream entry

	n     int64  // gateNotStarted: µs to the start; gateLimitReached: units held; gateBadQuantity: the limit; gateKeyPlaced: the order id
	order string // gateDuplicate: the buyer's order id
}

// parseGateReplies reads gate.lua's answer to a batch whose orders asked
// for units[i] units each: one reply per order. A reply of another shape
// is an error for them all, never a guess.
func parseGateReplies(res []rueidis.RedisMessage, units []int64) ([]gateReply, error) {
	if len(res) == 0 {
		return nil, fmt.Errorf("async: gate answered nothing")
	}
	code, err := res[0].AsInt64()
	if err != nil {
		return nil, fmt.Errorf("async: gate answered %v: %w", res, err)
	}
	if code != gateAccepted { // the whole batch: not loaded, not started, ended
		one := gateReply{code: code}
		if code == gateNotStarted {
			if len(res) != 2 {
				return nil, fmt.Errorf("async: gate answered %v: not started without its wait", res)
			}
			if one.n, err = res[1].AsInt64(); err != nil {
				return nil, fmt.Errorf("async: gate answered %v: %w", res, err)
			}
		}
		out := make([]gateReply, len(units))
		for i := range out {
			out[i] = one
		}
		return out, nil
	}
	const headLen = 9
	if len(res) != headLen+len(units) {
		return nil, fmt.Errorf("async: gate answered %d values for %d orders", len(res), len(units))
	}
	var nums [headLen - 2]int64 // stock, given, initial, loaded, returned, pay_by, window
	for i := range nums {
		if nums[i], err = res[1+i].AsInt64(); err != nil {
			return nil, fmt.Errorf("async: gate's head: %w", err)
		}
	}
	entry, err := res[headLen-1].ToString() // of the accepted orders
	if err != nil {
		return nil, fmt.Errorf("async: gate's head: %w", err)
	}
	head := &gateHead{given: nums[1], initial: nums[2], loaded: nums[3], returned: nums[4], payBy: nums[5], window: nums[6]}
	stock := nums[0]
	out := make([]gateReply, len(units))
	for i, m := range res[headLen:] {
		r, err := parseOrderReply(m)
		if err != nil {
			return nil, err
		}
		if r.code == gateAccepted {
			stock -= units[i]
			r.left, r.entry = stock, entry
		}
		r.head = head
		out[i] = r
	}
	return out, nil
}

// parseOrderReply reads one order's reply after the head: accepted's 0,
// sold out's 4, or an array of a refusal's code and details.
func parseOrderReply(m rueidis.RedisMessage) (gateReply, error) {
	if code, err := m.AsInt64(); err == nil {
		return gateReply{code: code}, nil
	}
	a, err := m.ToArray()
	if err != nil || len(a) == 0 {
		return gateReply{}, fmt.Errorf("async: gate answered %v for an order: %v", m, err)
	}
	var r gateReply
	if r.code, err = a[0].AsInt64(); err != nil {
		return gateReply{}, fmt.Errorf("async: gate's reply code: %w", err)
	}
	switch r.code {
	case gateDuplicate:
		if len(a) > 1 {
			r.order, err = a[1].ToString()
		}
	case gateLimitReached, gateBadQuantity:
		if len(a) > 1 {
			r.n, err = a[1].AsInt64()
		}
	case gateKeyPlaced:
		if len(a) < 3 {
			return gateReply{}, fmt.Errorf("async: gate answered %v for a keyed order", a)
		}
		if r.n, err = a[1].AsInt64(); err == nil {
			r.entry, err = a[2].ToString()
		}
	default:
		err = fmt.Errorf("unknown code %d", r.code)
	}
	if err != nil {
		return gateReply{}, fmt.Errorf("async: gate's reply %v: %w", a, err)
	}
	return r, nil
}

// answerGates gives each call of the batch its reply from r, gate.lua's
// answer to gateInput(batch), or r's error.
func answerGates(batch []*gateCall, r rueidis.RedisResult) {
	res, err := r.ToArray()
	var replies []gateReply
	if err == nil {
		units := make([]int64, len(batch))
		for i, c := range batch {
			units[i], _ = strconv.ParseInt(c.args[2], 10, 64) // orderArgs formatted it
		}
		replies, err = parseGateReplies(res, units)
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.reply, c.err = &replies[i], nil // nil: a NOSCRIPT sent again with EVAL (replicaRound)
		}
	}
}
