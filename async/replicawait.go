package async

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/async/internal/replica"
)

// Durability replica: the gate's script and a WAIT go on one dedicated
// connection (async/internal/replica says why and how). One WAIT covers
// every earlier write of its connection, so the orders of one voucher are
// grouped: a batch is whatever arrived while the previous batch waited
// (group commit, the queue of gatebatch.go), sent as
//
//	EVALSHA gate <the batch's orders> SET <tag>sync 1 EX … WAIT n timeout
//
// in one round trip, and up to replicaWorkers batches of a voucher are in
// flight at once. An answer that reveals an earlier order without writing
// — duplicate_order, or FindOrder finding a pending order — may name an
// order written on another connection, by another instance, that no
// replica has yet: the SET makes the WAIT cover it too.

// Batching limits.
const (
	replicaWorkers  = 4   // batches of one voucher in flight at once
	replicaMaxBatch = 256 // orders in one batch
	// replicaSlack is added to the replica timeout for the whole round
	// trip of a batch.
	replicaSlack = 5 * time.Second
)

// gateSHA is the SHA1 of gate.lua, for EVALSHA.
var gateSHA = func() string {
	sum := sha1.Sum([]byte(gateLua))
	return hex.EncodeToString(sum[:])
}()

// replicaBatch sends one batch and answers its calls.
//
// On Redis Cluster the dedicated connection is pinned to the master that
// owned the voucher's slot when it was taken, and rueidis does not follow
// redirects on it: while the slot migrates or fails over, a call may be
// answered MOVED, ASK, TRYAGAIN or CLUSTERDOWN, which Redis sends before
// running anything. Those calls are sent again, on a connection taken anew
// (rueidis has refreshed the slot map by then), until the batch's deadline.
func (s *Service) replicaBatch(q *gateQueue, batch []*gateCall) {
	d := s.cfg.Durability
	ctx, cancel := context.WithTimeout(context.Background(), d.ReplicaTimeout+replicaSlack)
	defer cancel()
	pending := batch
	for attempt := 1; ; attempt++ {
		var again []*gateCall
		err := s.client.Dedicated(func(dc rueidis.DedicatedClient) error {
			again = s.replicaRound(ctx, dc, q, pending)
			return nil
		})
		if err != nil {
			for _, c := range pending {
				if c.err == nil && c.reply == nil {
					c.err, c.durable = err, false
				}
			}
			return
		}
		if len(again) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(attempt)*5*time.Millisecond, 100*time.Millisecond)):
		}
		pending = again
	}
}

// replicaRound sends calls on dc — one gate call for those with args and
// no reply yet, then the SET and the WAIT — and answers them. A gate call
// Redis answers NOSCRIPT (a restarted or promoted Redis has no script
// cache) is sent again with EVAL, followed by its own SET and WAIT. It returns the
// calls to send again elsewhere: those redirected (see replicaBatch), and
// all of them when the SET or WAIT was, since that WAIT then says nothing
// of their writes.
func (s *Service) replicaRound(ctx context.Context, dc rueidis.DedicatedClient, q *gateQueue, calls []*gateCall) (again []*gateCall) {
	d := s.cfg.Durability
	w := replica.Wait{Key: q.syncKey, Replicas: d.MinReplicas, Timeout: d.ReplicaTimeout}
	sha := true
	for len(calls) > 0 {
		gates := calls[:0:0]
		for _, c := range calls {
			if c.args != nil && c.reply == nil {
				gates = append(gates, c)
			}
		}
		var cmds []rueidis.Completed
		if len(gates) > 0 {
			keys, args := s.gateInput(q, gates)
			cmds = append(cmds, gateCmd(dc, keys, args, sha))
		}
		res, werr := w.Round(ctx, dc, cmds...)
		for _, c := range calls {
			c.durable = werr == nil
		}
		if len(gates) > 0 {
			answerGates(gates, res[0])
		}
		if redirected(werr) {
			// This connection no longer reaches the slot's master: all of
			// them again elsewhere (NOSCRIPT ones too, the gate of those
			// redirected too: they have no reply).
			return append(again, calls...)
		}
		next := calls[:0:0]
		for _, c := range gates {
			if e, ok := rueidis.IsRedisErr(c.err); ok && e.IsNoScript() && sha {
				next = append(next, c)
			} else if redirected(c.err) {
				again = append(again, c)
			}
		}
		calls, sha = next, false
	}
	return again
}

// redirected reports whether err is a Redis Cluster answer sent instead of
// running the command: it may be sent again to the slot's master.
func redirected(err error) bool {
	e, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	_, moved := e.IsMoved()
	_, ask := e.IsAsk()
	return moved || ask || e.IsTryAgain() || e.IsClusterDown()
}

// gateCmd returns the gate script call for args: EVALSHA, or EVAL.
func gateCmd(dc rueidis.DedicatedClient, keys, args []string, sha bool) rueidis.Completed {
	if sha {
		return dc.B().Evalsha().Sha1(gateSHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	return dc.B().Eval().Script(gateLua).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// confirmReplicated returns nil once what Redis has executed so far for
// the voucher — an order just found there — is on the replicas, or the
// answer for a buyer when they do not acknowledge it in time.
func (s *Service) confirmReplicated(ctx context.Context, voucherID int64) error {
	c := &gateCall{ctx: ctx}
	if err := s.gate(voucherID, newLocal(s.keys, voucherID).gateKeys, 1, c); err != nil {
		return unavailable("wait for replicas", err)
	}
	if !c.durable {
		return notDurable("the order is not yet safe on enough Redis replicas; try again")
	}
	return nil
}
