package async

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/flashsale/flashsale/internal/groupcommit"
)

// Group commit at the gate (internal/groupcommit). The orders of one voucher (of one shard of a
// sharded voucher) that arrive while its previous gate call is on its way
// are sent together, as one call of gate.lua deciding them in arrival
// order. A lone order goes out at once, alone; under load a batch is
// whatever queued during one round trip, so nobody waits for a timer,
// but on a shard of a voucher of K shards: its batches would be 1/K as
// large, so its queue lingers, briefly, for K times what queued during
// the previous call (Config.ShardLinger).
// Redis runs the script's preamble (meta, clock, window) once per batch
// instead of once per order, and the client writes, and Redis reads and
// answers, one command.
//
// Durability replica batches the same queue its own way (replicawait.go):
// each batch is followed by a WAIT on a dedicated connection.

// Batching limits. One gate call of a voucher is in flight at a time
// (replicaWorkers in durability replica): that gives the largest batches;
// 2 and 4 cost a little more CPU per order in BenchmarkHotVoucher and
// answered no faster.
const (
	gateMaxBatch = 128 // orders in one gate call
	// gateTimeout bounds one gate call, and so how long a caller whose ctx
	// ended after its batch took it waits for the answer.
	gateTimeout = 10 * time.Second
	// shardFill caps the batch a shard's queue lingers for
	// (Config.ShardLinger): one voucher's batches hold about 16 orders
	// at 64 in flight through serve (BenchmarkServeShards), where a
	// call's own cost is already shared by many.
	shardFill = 16
	// DefaultShardLinger is Config.ShardLinger's default, chosen by
	// BenchmarkServeShards (docs/benchmarks.md, helper i34k): past it,
	// longer lingers bought little more.
	DefaultShardLinger = 4 * time.Millisecond
)

// errGateBusy is gate's answer to an order while the queue is too slow
// (Config.MaxGateWait): PlaceOrder answers EBusy.
var errGateBusy = errors.New("async: the gate's queue is over its wait")

// gateCall is one order waiting for a batch, or, when args is nil (only
// in durability replica), a request only to know that what Redis executed
// so far is on the replicas.
type gateCall struct {
	groupcommit.Call
	ctx  context.Context // the caller's
	args []string        // user, order, quantity, idempotency key (orderArgs)
	// level is the lowest level seen of the voucher (of the shard) the
	// call is for (rewind.go), or nil.
	level *atomic.Pointer[levelMark]

	// Set by the worker, read by the caller once gate returned.
	seen    *levelMark // level, read as a batch took the call, before it was sent
	reply   *gateReply // nil until answered
	err     error
	durable bool // the replicas acknowledged the batch (always true but in durability replica)

	// Set by admit for an order: when it was queued, and how many
	// batches it is to wait for, its own included (0 for no args).
	queued  time.Time
	batches int
}

// gateQueue is what the batches of one voucher (or shard) are sent with.
// Its groupcommit.Queue lives in Service.gates, under the meta key, while
// it has work, so a voucher's concurrent callers share one (even before
// the voucher is kept in Service.locals), and ids nobody sells leave
// nothing behind.
type gateQueue struct {
	gateKeys []string // meta, buyers, orders, keyed
	voucher  string   // the voucher's id, for the pointers
	syncKey  string
	maxBatch int
	maxWait  time.Duration // Config.MaxGateWait

	pace *atomic.Int64 // Service.gatePace
	// inflight counts the batches being run.
	inflight atomic.Int64
}

// gate runs c (its args, or, for nil args, nothing) in the next batch of
// gate.lua on keys (a voucher's, or a shard's of a voucher of shards
// shards: see newGateQueue). It returns c.err
// once c is answered (c.reply, c.durable and c.seen are set then),
// errGateBusy (see admit), or c.ctx's error when c.ctx ends before a
// batch took c: c is then never sent. Once taken, c waits for its batch's
// answer even if c.ctx ends (internal/groupcommit's rule), at most
// gateTimeout (in durability replica, the replica timeout and its slack).
func (s *Service) gate(voucherID int64, keys []string, shards int, c *gateCall) error {
	open := func() *groupcommit.Queue[*gateCall] { return s.newGateQueue(voucherID, keys, shards) }
	if err := s.gates.Do(c.ctx, keys[0], c, open); err != nil {
		return err
	}
	return c.err
}

// newGateQueue returns an empty queue for the voucher's keys, sized for
// the durability mode. A shard's queue (shards > 1) lingers, up to
// Config.ShardLinger, for batches as large as the voucher's one queue
// would send: shards times what queued during the previous call, at most
// shardFill.
func (s *Service) newGateQueue(voucherID int64, keys []string, shards int) *groupcommit.Queue[*gateCall] {
	q := &gateQueue{gateKeys: keys, voucher: strconv.FormatInt(voucherID, 10), maxBatch: gateMaxBatch,
		maxWait: s.cfg.MaxGateWait, pace: &s.gatePace}
	workers, run, linger := 1, s.gateBatch, time.Duration(0)
	if shards > 1 {
		linger = max(s.cfg.ShardLinger, 0)
	}
	if s.cfg.Durability.Mode == DurabilityReplica {
		// No shards in durability replica: keys are the voucher's.
		q.syncKey = newLocal(s.keys, voucherID).syncKey
		workers, q.maxBatch, run = replicaWorkers, replicaMaxBatch, s.replicaBatch
	}
	return groupcommit.New(groupcommit.Config[*gateCall]{
		Workers: workers, Max: q.maxBatch, Admit: q.admit, Take: takeGate,
		Linger: linger, Fill: func(queued int) int { return min(shards*queued, shardFill) },
		Run: func(batch []*gateCall) {
			q.inflight.Add(1)
			run(q, batch)
			q.inflight.Add(-1)
			q.paced(batch, time.Now())
		},
	})
}

// admit refuses, with errGateBusy, an order that would wait too long:
// one whose batches ahead (the one in flight, the full ones queued) and
// its own would take longer than maxWait at the pace orders waited lately
// (paced). One full batch may always wait, so a slow Redis still gets
// full batches, and a burst on a fast one is queued whole (issue 34: p99
// ≤ 100 ms when Redis is the bottleneck, and busy answers only then). A
// call with no args (confirmReplicated) is never refused. admit notes
// when c was queued and how many batches it is to wait for.
func (q *gateQueue) admit(c *gateCall, queued int) error {
	if c.args == nil {
		return nil
	}
	c.queued, c.batches = time.Now(), queued/q.maxBatch+1
	if q.inflight.Load() > 0 {
		c.batches++
	}
	if queued >= q.maxBatch && time.Duration(c.batches)*time.Duration(q.pace.Load()) > q.maxWait {
		return errGateBusy
	}
	return nil
}

// paced takes into q.pace, from a batch just answered, how long its
// orders waited per batch they waited for, queued to answered: a moving
// average over the instance's batches (their Redis is usually one
// server, or masters alike). Unlike the time of the gate calls alone, it
// counts whatever held the orders: the rest of the call in flight when
// they came, other clients' commands run before theirs (the consumer's
// reads and acks of hundreds of entries), the time between calls.
func (q *gateQueue) paced(batch []*gateCall, answered time.Time) {
	var sum time.Duration
	n := 0
	for _, c := range batch {
		if c.batches > 0 {
			sum += answered.Sub(c.queued) / time.Duration(c.batches)
			n++
		}
	}
	if n > 0 {
		pace := q.pace.Load() // racing workers of other queues may lose a sample: no matter
		q.pace.Store(pace + (int64(sum)/int64(n)-pace)/4)
	}
}

// takeGate reads c's level as a batch takes it: the level seen before
// the order was sent (rewind.go).
func takeGate(c *gateCall) {
	if c.level != nil {
		c.seen = c.level.Load()
	}
}

// gateBatch decides a batch with one call of gate.lua and answers its
// calls.
func (s *Service) gateBatch(q *gateQueue, batch []*gateCall) {
	ctx, cancel := context.WithTimeout(context.Background(), gateTimeout)
	defer cancel()
	keys, args := s.gateInput(q, batch)
	answerGates(batch, gateScript.Exec(ctx, s.client, keys, args))
	for _, c := range batch {
		c.durable = true
	}
}

// gateInput returns gate.lua's KEYS and ARGV for the batch: the queue's
// keys and the buckets of the orders' pointers (usually one), the voucher,
// the pointers' TTL and the stride, and each order's arguments: with a
// stride of 5 all four and its bucket's index in KEYS, with one of 2 (a
// batch of one-unit orders without keys, their pointers in one bucket)
// only the user and the order id.
func (s *Service) gateInput(q *gateQueue, batch []*gateCall) (keys, args []string) {
	keys = append(make([]string, 0, len(q.gateKeys)+1), q.gateKeys...)
	buckets := make([]int, len(batch))
	simple := true
	for j, c := range batch {
		id, _ := strconv.ParseInt(c.args[1], 10, 64) // orderArgs formatted it
		bucket, _ := s.keys.Pointer(id)
		i := slices.Index(keys[len(q.gateKeys):], bucket)
		if i < 0 {
			i = len(keys) - len(q.gateKeys)
			keys = append(keys, bucket)
		}
		buckets[j] = len(q.gateKeys) + i + 1 // Lua counts from 1
		simple = simple && i == 0 && c.args[2] == "1" && c.args[3] == ""
	}
	stride := 5
	if simple {
		stride = 2
	}
	args = make([]string, 0, 3+stride*len(batch))
	args = append(args, q.voucher, strconv.FormatInt(max(s.cfg.PointerTTL.Milliseconds(), 1), 10), strconv.Itoa(stride)) // PX: a TTL under a second still expires
	for j, c := range batch {
		if simple {
			args = append(args, c.args[0], c.args[1])
		} else {
			args = append(args, c.args...)
			args = append(args, strconv.Itoa(buckets[j]))
		}
	}
	return keys, args
}
