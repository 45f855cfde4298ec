package consume

import (
	"context"
	"time"
)

// A worker sizes its reads by how long its acks take (issue 34). One
// XREADGROUP of 500 entries and its ack.lua cost Redis 2 to 4 ms of CPU:
// on a Redis held to a tenth of a core that is 30 to 40 ms during which no
// gate call runs, and the gate's p99 passes 100 ms. So while acks are slow
// (Redis is the bottleneck), a read takes half as many orders, down to a
// quarter of Config.BatchSize, and the ack that follows is as small; once
// acks are quick again, reads grow back to BatchSize. A fast Redis never
// shrinks them, so the normal case pays nothing: smaller batches cost
// Redis more per order (the ack's trim and the read are per call) and
// MySQL a transaction more.
//
// Reads are not timed: one may have waited for entries (Block), which
// says nothing of Redis.
//
// slowAck is a fifth of the 100 ms an order's answer may take when Redis
// is the bottleneck: an ack of 500 entries passes it on a Redis held to a
// tenth of a core, not on one held to a quarter.
const slowAck = 20 * time.Millisecond // above: halve; below a quarter of it: double

// readCount is how many orders the worker's next read is for.
func (w *worker) readCount() int {
	if w.count == 0 {
		return w.c.cfg.BatchSize
	}
	return w.count
}

// An entry holds a gate batch: one order or a few hundred. So a read
// asks for readCount orders' worth of entries at the size of the entries
// the worker read last (one order each before any), at least one; and
// persistChunks keeps each transaction, and each ack, to BatchSize orders
// whatever a read brings.

// readEntries is how many entries the worker's next read asks for.
func (w *worker) readEntries() int {
	return max(1, w.readCount()/max(w.perEntry, 1))
}

// learn records the size of the entries just read: orders in entries.
func (w *worker) learn(entries, orders int) {
	if entries > 0 {
		w.perEntry = max(1, orders/entries)
	}
	w.lastRead = orders
}

// linger waits Config.Linger after a read of new entries that brought
// orders but under a quarter of readCount: the next read finds more, and
// its XREADGROUP, ack and transaction are shared by more orders. A read
// that found nothing waited in Block already.
func (w *worker) linger(ctx context.Context) error {
	if w.lastRead == 0 || w.lastRead >= w.readCount()/4 || w.c.cfg.Linger <= 0 {
		return nil
	}
	return sleep(ctx, w.c.cfg.Linger)
}

// paced sizes the worker's next reads by the time its last ack took.
func (w *worker) paced(took time.Duration) {
	n := w.readCount()
	switch {
	case took > slowAck:
		w.count = max(n/2, w.c.cfg.BatchSize/4, 1)
	case took < slowAck/4:
		w.count = min(2*n, w.c.cfg.BatchSize)
	}
}
