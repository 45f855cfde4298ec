package async

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/layout"
)

// Internals the external tests (package async_test) use.

var (
	GateScript = gateScript
	InfoFields = infoFields
	EpochKeys  = epochKeys
)

// The gate's answers, and the largest batch of one gate call.
const (
	GateAccepted   = gateAccepted
	GateDuplicate  = gateDuplicate
	GateSoldOut    = gateSoldOut
	GateNotStarted = gateNotStarted
	GateKeyPlaced  = gateKeyPlaced
	GateMaxBatch   = gateMaxBatch
)

// GateDecision is one order's decision in a gate.lua reply: its code and
// its value (stock left, a duplicate's order id), as a string.
type GateDecision struct {
	Code  int64
	Value string
}

// ParseGateReplies reads gate.lua's reply to orders of units[i] units.
func ParseGateReplies(res []rueidis.RedisMessage, units []int64) ([]GateDecision, error) {
	replies, err := parseGateReplies(res, units)
	out := make([]GateDecision, len(replies))
	for i, r := range replies {
		out[i].Code = r.code
		switch r.code {
		case gateAccepted:
			out[i].Value = strconv.FormatInt(r.left, 10)
		case gateDuplicate:
			out[i].Value = r.order
		case gateKeyPlaced:
			out[i].Value = strconv.FormatInt(r.n, 10) + ":" + r.entry
		}
	}
	return out, err
}

// Keys returns the Service's keyspace.
func (s *Service) Keys() layout.Keyspace { return s.keys }

// Queued reports whether a gate queue is open for keys (a voucher's gate
// keys' meta key).
func (s *Service) Queued(meta string) bool {
	return s.gates.Has(meta)
}

// GateQueued returns how many orders wait for a batch of the gate queue
// of keys (a voucher's or a shard's gate keys' meta key).
func (s *Service) GateQueued(meta string) int { return s.gates.Len(meta) }

// ReadTopology returns the cluster's slot map as the epoch check reads it.
func (s *Service) ReadTopology(ctx context.Context) (topology, error) { return s.readTopology(ctx) }

// LevelsSeen reports, per shard of the voucher, whether the Service has
// seen a level (false for all when it keeps no state of the voucher).
func (s *Service) LevelsSeen(voucherID int64, shards int) (kept bool, seen []bool) {
	l, ok := s.locals.Load(voucherID)
	if !ok {
		return false, nil
	}
	seen = make([]bool, shards)
	for i := range seen {
		seen[i] = l.(*local).levels[i].Load() != nil
	}
	return true, seen
}
