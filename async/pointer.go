package async

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/idgen"
)

// Order pointers tell FindOrder which voucher and user an order id belongs
// to while the order is not in MySQL yet. They cannot be written by
// gate.lua: a script's keys share the voucher's hash tag, and a lookup by
// order id does not know the voucher. So they are written after the gate
// accepted, and to keep that cheap they are batched: the pointers of the
// orders accepted while the previous batch was on its way go out together,
// as one HSET per bucket followed by its PEXPIRE, in one round trip. A
// bucket is a hash of the orders whose ids were allocated in the same 16
// seconds for the same slot, in that slot (an id carries its second and
// its shard's slot: layout.Pointer), so FindOrder finds the bucket from
// the id alone, each command touches one key, and a sharded voucher's
// pointers are written on its shards' masters. Each slot has its own
// queue and workers, so an order waits only for its own shard's master,
// never for the slowest of them. A bucket expires PointerTTL after its
// last write.

const (
	// pointerWorkers bounds the batches of one slot in flight at once.
	pointerWorkers = 2
	// pointerMaxBatch bounds the pointers of one batch.
	pointerMaxBatch = 512
	// pointerTimeout bounds the write of a batch, which must not be cut
	// short by a caller that stops waiting: the orders stand.
	pointerTimeout = 2 * time.Second
)

// pointerCall is one accepted order waiting for its pointer's batch.
type pointerCall struct {
	order *flashsale.Order
	entry string // the order's stream entry
	done  chan struct{}
}

// pointerQueue collects the pointers waiting for a batch.
type pointerQueue struct {
	mu      sync.Mutex
	calls   []*pointerCall
	workers int
}

// writePointer records which voucher and user an accepted order belongs
// to, and its stream entry, so FindOrder can answer "pending" before the order is in MySQL, and
// returns once it is written (with the pointers of the orders accepted
// meanwhile). A failure is logged, not returned: the order is accepted and
// will be persisted; only its lookup by id waits for that.
func (s *Service) writePointer(o *flashsale.Order, entry string) {
	c := &pointerCall{order: o, entry: entry, done: make(chan struct{})}
	q := s.pointerQueue(o.ID)
	q.mu.Lock()
	q.calls = append(q.calls, c)
	start := q.workers < pointerWorkers
	if start {
		q.workers++
	}
	q.mu.Unlock()
	if start {
		go s.pointerWorker(q)
	}
	<-c.done
}

// pointerQueue returns the queue of the slot an order id carries (one
// queue for every id that carries none).
func (s *Service) pointerQueue(id int64) *pointerQueue {
	slot, ok := idgen.Slot(id)
	if !ok {
		slot = -1
	}
	if q, ok := s.pointers.Load(slot); ok {
		return q.(*pointerQueue)
	}
	q, _ := s.pointers.LoadOrStore(slot, new(pointerQueue))
	return q.(*pointerQueue)
}

// pointerWorker writes batches of q's pointers until none are waiting.
func (s *Service) pointerWorker(q *pointerQueue) {
	for {
		q.mu.Lock()
		n := min(len(q.calls), pointerMaxBatch)
		if n == 0 {
			q.workers--
			q.mu.Unlock()
			return
		}
		batch := q.calls[:n:n]
		q.calls = append([]*pointerCall(nil), q.calls[n:]...)
		q.mu.Unlock()
		s.writePointers(batch)
	}
}

// writePointers writes one batch of pointers and releases its callers.
func (s *Service) writePointers(batch []*pointerCall) {
	defer func() {
		for _, c := range batch {
			close(c.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), pointerTimeout)
	defer cancel()
	buckets := map[string][]string{} // usually one
	for _, c := range batch {
		o := c.order
		key, field := s.keys.Pointer(o.ID)
		buckets[key] = append(buckets[key], field, strconv.FormatInt(o.VoucherID, 10)+":"+strconv.FormatInt(o.UserID, 10)+":"+c.entry)
	}
	ttl := max(s.cfg.PointerTTL.Milliseconds(), 1) // PX: a TTL under a second still expires
	cmds := make(rueidis.Commands, 0, 2*len(buckets))
	for key, fv := range buckets {
		cmds = append(cmds,
			hset(s.client, key, fv),
			s.client.B().Pexpire().Key(key).Milliseconds(ttl).Build())
	}
	for _, res := range s.client.DoMulti(ctx, cmds...) {
		if err := res.Error(); err != nil {
			s.log.Warn("async: orders accepted, but their pointers were not written; they can be found once persisted",
				"orders", len(batch), "first", batch[0].order.ID, "err", err)
			return
		}
	}
}

// hset returns HSET key with the fields and values in fv.
func hset(client rueidis.Client, key string, fv []string) rueidis.Completed {
	cmd := client.B().Hset().Key(key).FieldValue()
	for i := 0; i+1 < len(fv); i += 2 {
		cmd = cmd.FieldValue(fv[i], fv[i+1])
	}
	return cmd.Build()
}

// pointer is what an order's pointer says: its voucher, user and stream
// entry.
type pointer struct {
	voucher, user int64
	entry         string
}

// findPointer returns an order's pointer, or ENotFound when there is none.
func (s *Service) findPointer(ctx context.Context, id int64) (pointer, error) {
	key, field := s.keys.Pointer(id)
	val, err := s.client.Do(ctx, s.client.B().Hget().Key(key).Field(field).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return pointer{}, flashsale.Errorf(flashsale.ENotFound, "order %d not found", id)
	}
	if err != nil {
		return pointer{}, unavailable(fmt.Sprintf("find order %d", id), err)
	}
	p, err := parsePointer(val)
	if err != nil {
		return pointer{}, fmt.Errorf("async: pointer of order %d: %w", id, err)
	}
	return p, nil
}

// parsePointer reads an order pointer, "<voucher>:<user>:<entry id>".
func parsePointer(val string) (pointer, error) {
	parts := strings.SplitN(val, ":", 3)
	if len(parts) != 3 {
		return pointer{}, fmt.Errorf("%q is not voucher:user:entry", val)
	}
	var p pointer
	var err error
	if p.voucher, err = strconv.ParseInt(parts[0], 10, 64); err != nil {
		return pointer{}, err
	}
	if p.user, err = strconv.ParseInt(parts[1], 10, 64); err != nil {
		return pointer{}, err
	}
	p.entry = parts[2]
	return p, nil
}
