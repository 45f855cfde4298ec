package admission

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/internal/luascript"
)

// Group calls, as the async gate batches orders (async/gatebatch.go): the
// joins (the polls) of one voucher that arrive while its previous join
// (poll) script is on its way go together, as one call of join.lua
// (poll.lua) answering them in arrival order. A lone call goes out at
// once; under load a batch is whatever queued during one round trip. Redis
// runs a script's preamble (clock, meta) once per batch, and the client
// writes, and Redis reads and answers, one command. One script call of a
// lane is in flight at a time: that gives the largest batches, and two
// answered no faster in BenchmarkQueue (as the gate found in
// BenchmarkHotVoucher).

// Batching limits.
const (
	maxBatch     = 128 // calls in one script call
	batchTimeout = 10 * time.Second
)

// call is one join or poll waiting for its batch.
type call struct {
	ctx   context.Context // the caller's: a call whose ctx ended is not sent
	args  []string        // its part of the script's ARGV
	reply []rueidis.RedisMessage
	head  []rueidis.RedisMessage // the batch's shared part of the answer
	err   error
	done  chan struct{}
}

// lane is the calls of one script on one voucher's keys. Lanes live in
// Queue.lanes while they have work.
type lane struct {
	home   *sync.Map
	id     string
	script *luascript.Script
	keys   []string
	head   []string // ARGV before the calls'
	// skip is how many replies of the script's answer precede the calls'.
	skip int

	mu      sync.Mutex
	calls   []*call
	running bool // its worker
}

// batched runs c in the next batch of script on keys, whose ARGV is head
// and then every call's args, and whose answer is skip shared replies and
// then one array per call. It returns once c is answered, or c.ctx ends.
func (q *Queue) batched(id string, script *luascript.Script, keys, head []string, skip int, c *call) error {
	c.done = make(chan struct{})
	l, ok := q.lanes.Load(id)
	if !ok {
		l, _ = q.lanes.LoadOrStore(id, &lane{home: &q.lanes, id: id, script: script, keys: keys, head: head, skip: skip})
	}
	if l.(*lane).add(c) {
		go q.laneWorker(l.(*lane))
	}
	select {
	case <-c.done:
		return c.err
	case <-c.ctx.Done():
		return c.ctx.Err()
	}
}

// add queues c and returns whether the caller must start a worker.
func (l *lane) add(c *call) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	if l.running {
		return false
	}
	l.running = true
	return true
}

// next takes up to maxBatch calls whose ctx has not ended; nil when the
// lane is empty (the worker leaves and the lane leaves Queue.lanes). A
// caller that found the lane just before then still gets its batch: its
// add starts a worker.
func (l *lane) next() []*call {
	l.mu.Lock()
	defer l.mu.Unlock()
	var batch []*call
	i := 0
	for ; i < len(l.calls) && len(batch) < maxBatch; i++ {
		if err := l.calls[i].ctx.Err(); err != nil {
			l.calls[i].err = err
			close(l.calls[i].done)
			continue
		}
		batch = append(batch, l.calls[i])
	}
	l.calls = append([]*call(nil), l.calls[i:]...)
	if len(batch) == 0 {
		l.running = false
		l.home.CompareAndDelete(l.id, l)
	}
	return batch
}

// laneWorker sends the lane's batches until it is empty.
func (q *Queue) laneWorker(l *lane) {
	for {
		batch := l.next()
		if batch == nil {
			return
		}
		args := append(make([]string, 0, len(l.head)+3*len(batch)), l.head...)
		for _, c := range batch {
			args = append(args, c.args...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		res, err := l.script.Exec(ctx, q.client, l.keys, args).ToArray()
		cancel()
		if err == nil && len(res) != l.skip+len(batch) {
			err = fmt.Errorf("admission: the script answered %d replies for %d calls", len(res), len(batch))
		}
		for i, c := range batch {
			if err != nil {
				c.err = err
			} else {
				c.head = res[:l.skip]
				c.reply, c.err = res[l.skip+i].ToArray()
			}
			close(c.done)
		}
	}
}
