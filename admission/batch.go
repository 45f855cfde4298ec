package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/flashsale/flashsale/internal/groupcommit"
	"github.com/flashsale/flashsale/internal/luascript"
)

// Group calls (internal/groupcommit), as the async gate batches orders: the
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
	groupcommit.Call
	ctx   context.Context // the caller's
	args  []string        // its part of the script's ARGV
	reply []rueidis.RedisMessage
	head  []rueidis.RedisMessage // the batch's shared part of the answer
	err   error
}

// lane is the calls of one script on one voucher's keys: a
// groupcommit.Queue in Queue.lanes while it has work.
type lane struct {
	q      *Queue
	script *luascript.Script
	keys   []string
	head   []string // ARGV before the calls'
	// skip is how many replies of the script's answer precede the calls'.
	skip int
}

// batched runs c in the next batch of script on keys, whose ARGV is head
// and then every call's args, and whose answer is skip shared replies and
// then one array per call. It returns once c is answered, or with c.ctx's
// error when c.ctx ends before a batch took c (internal/groupcommit's
// rule: once taken, c gets its batch's answer).
func (q *Queue) batched(id string, script *luascript.Script, keys, head []string, skip int, c *call) error {
	open := func() *groupcommit.Queue[*call] {
		l := &lane{q: q, script: script, keys: keys, head: head, skip: skip}
		return groupcommit.New(groupcommit.Config[*call]{Workers: 1, Max: maxBatch, Run: l.run})
	}
	if err := q.lanes.Do(c.ctx, id, c, open); err != nil {
		return err
	}
	return c.err
}

// run sends one batch and answers its calls.
func (l *lane) run(batch []*call) {
	args := append(make([]string, 0, len(l.head)+3*len(batch)), l.head...)
	for _, c := range batch {
		args = append(args, c.args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	res, err := l.script.Exec(ctx, l.q.client, l.keys, args).ToArray()
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
	}
}
