package async

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit at the gate. The orders of one voucher (of one shard of a
// sharded voucher) that arrive while its previous gate call is on its way
// are sent together, as one call of gate.lua deciding them in arrival
// order. A lone order goes out at once, alone; under load a batch is
// whatever queued during one round trip, so nobody waits for a timer.
// Redis runs the script's preamble (meta, clock, window) once per batch
// instead of once per order, and the client writes, and Redis reads and
// answers, one command.
//
// Durability replica batches the same queue its own way (replicawait.go):
// each batch is followed by a WAIT on a dedicated connection.

// Batching limits.
const (
	// gateWorkers is how many gate calls of one voucher are in flight at
	// once. One gives the largest batches; 2 and 4 cost a little more CPU
	// per order in BenchmarkHotVoucher and answered no faster.
	gateWorkers  = 1
	gateMaxBatch = 128 // orders in one gate call
	// gateTimeout bounds one gate call. A caller whose ctx ends first is
	// answered then; the call goes on for the others.
	gateTimeout = 10 * time.Second
)

// errGateBusy is gate's answer to an order while the queue is too slow
// (Config.MaxGateWait): PlaceOrder answers EBusy.
var errGateBusy = errors.New("async: the gate's queue is over its wait")

// gateCall is one order waiting for a batch, or, when args is nil (only
// in durability replica), a request only to know that what Redis executed
// so far is on the replicas.
type gateCall struct {
	ctx    context.Context // the caller's: a call whose ctx ended is not sent
	queued time.Time       // when it joined the queue
	args   []string        // user, order, quantity, idempotency key (orderArgs)
	// level is the lowest level seen of the voucher (of the shard) the
	// call is for (rewind.go), or nil.
	level *atomic.Pointer[levelMark]

	// Set by the worker, read by the caller once done is closed.
	seen    *levelMark // level, read just before the call was sent
	reply   *gateReply // nil until answered
	err     error
	durable bool // the replicas acknowledged the batch (always true but in durability replica)
	done    chan struct{}
}

// gateQueue collects the calls of one voucher (or shard) into batches.
// Queues live in Service.gates, under their meta key, while they have
// work, so a voucher's concurrent callers share one (even before the
// voucher is kept in Service.locals), and ids nobody sells leave nothing
// behind.
type gateQueue struct {
	home     *sync.Map // Service.gates
	gateKeys []string  // meta, buyers, orders, keyed
	voucher  string    // the voucher's id, for the pointers
	syncKey  string
	workers  int // the most batches in flight
	maxBatch int
	maxWait  time.Duration // Config.MaxGateWait

	took *atomic.Int64 // Service.gateTook

	mu      sync.Mutex
	calls   []*gateCall
	running int
}

// gate runs c (its args, or, for nil args, nothing) in the next batch of
// gate.lua on keys (a voucher's or a shard's gate keys). It returns c.err
// once c is answered (c.reply, c.durable and c.seen are set then), or
// c.ctx's error when c.ctx ends first: an order still queued then is
// never sent, one already sent may be taken, unanswered, as when a reply
// is lost.
func (s *Service) gate(voucherID int64, keys []string, c *gateCall) error {
	c.done = make(chan struct{})
	q, ok := s.gates.Load(keys[0])
	if !ok {
		q, _ = s.gates.LoadOrStore(keys[0], s.newGateQueue(voucherID, keys))
	}
	start, err := q.(*gateQueue).add(c)
	if err != nil {
		return err
	}
	if start {
		go s.gateWorker(q.(*gateQueue))
	}
	select {
	case <-c.done:
		return c.err
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// newGateQueue returns an empty queue for the voucher's keys, sized for
// the durability mode.
func (s *Service) newGateQueue(voucherID int64, keys []string) *gateQueue {
	q := &gateQueue{home: &s.gates, gateKeys: keys, voucher: strconv.FormatInt(voucherID, 10), workers: gateWorkers, maxBatch: gateMaxBatch,
		maxWait: s.cfg.MaxGateWait, took: &s.gateTook}
	if s.cfg.Durability.Mode == DurabilityReplica {
		// No shards in durability replica: keys are the voucher's.
		q.syncKey = newLocal(s.keys, voucherID).syncKey
		q.workers, q.maxBatch = replicaWorkers, replicaMaxBatch
	}
	return q
}

// add queues c and returns whether the caller must start a worker, or
// errGateBusy, queueing nothing, for an order that would wait too long:
// one with full batches ahead of it whose time, with the batch in
// flight's, at the time batches take now, passes maxWait. One full batch
// may always wait, so a slow Redis still gets full batches; a burst on a
// fast one is queued whole (issue 34: p99 ≤ 100 ms when Redis is the
// bottleneck, and busy answers only then).
func (q *gateQueue) add(c *gateCall) (bool, error) {
	c.queued = time.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if ahead := len(q.calls) / q.maxBatch; c.args != nil && ahead > 0 && time.Duration(ahead+1)*time.Duration(q.took.Load()) > q.maxWait {
		return false, errGateBusy
	}
	q.calls = append(q.calls, c)
	if q.running < q.workers {
		q.running++
		return true, nil
	}
	return false, nil
}

// gateWorker sends batches of the queue until it is empty (see next). A
// caller that found the queue in Service.gates just before it was removed
// still gets its batch: its add starts a worker.
func (s *Service) gateWorker(q *gateQueue) {
	for {
		batch := q.next()
		if batch == nil {
			return
		}
		start := time.Now()
		if s.cfg.Durability.Mode == DurabilityReplica {
			s.replicaBatch(q, batch)
		} else {
			s.gateBatch(q, batch)
		}
		took := q.took.Load() // racing workers of other queues may lose a sample: no matter
		q.took.Store(took + (int64(time.Since(start))-took)/4)
	}
}

// next takes the next batch off the queue: up to maxBatch calls whose
// ctx has not ended, each with its seen read now. Calls whose ctx ended
// are answered their ctx's error and dropped, never sent: after a stall,
// the orders of buyers who were told it failed take no stock. When the
// queue is empty it returns nil and the worker leaves (the last one out
// removes the queue from Service.gates).
func (q *gateQueue) next() []*gateCall {
	q.mu.Lock()
	defer q.mu.Unlock()
	var batch []*gateCall
	i := 0
	for ; i < len(q.calls) && len(batch) < q.maxBatch; i++ {
		c := q.calls[i]
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		if c.level != nil {
			c.seen = c.level.Load()
		}
		batch = append(batch, c)
	}
	q.calls = append([]*gateCall(nil), q.calls[i:]...)
	if len(batch) == 0 { // and so the queue is empty
		q.running--
		if q.running == 0 {
			q.home.CompareAndDelete(q.gateKeys[0], q)
		}
	}
	return batch
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
		close(c.done)
	}
}

// gateInput returns gate.lua's KEYS and ARGV for the batch: the queue's
// keys and the buckets of the orders' pointers (usually one), the voucher
// and the pointers' TTL, and each order's arguments with its bucket's
// index in KEYS.
func (s *Service) gateInput(q *gateQueue, batch []*gateCall) (keys, args []string) {
	keys = append(make([]string, 0, len(q.gateKeys)+1), q.gateKeys...)
	args = make([]string, 0, 2+5*len(batch))
	args = append(args, q.voucher, strconv.FormatInt(max(s.cfg.PointerTTL.Milliseconds(), 1), 10)) // PX: a TTL under a second still expires
	for _, c := range batch {
		id, _ := strconv.ParseInt(c.args[1], 10, 64) // orderArgs formatted it
		bucket, _ := s.keys.Pointer(id)
		i := slices.Index(keys[len(q.gateKeys):], bucket)
		if i < 0 {
			i = len(keys) - len(q.gateKeys)
			keys = append(keys, bucket)
		}
		args = append(args, c.args...)
		args = append(args, strconv.Itoa(len(q.gateKeys)+i+1)) // Lua counts from 1
	}
	return keys, args
}
