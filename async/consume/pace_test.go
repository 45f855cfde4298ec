package consume

import (
	"context"
	"testing"
	"time"
)

// TestReadsShrinkWhileAcksAreSlow: each slow ack halves the next reads,
// down to a quarter of BatchSize; each quick one doubles them, up to
// BatchSize; one in between leaves them.
func TestReadsShrinkWhileAcksAreSlow(t *testing.T) {
	w := &worker{c: &Consumer{cfg: Config{BatchSize: 500}}}
	steps := []struct {
		took time.Duration
		want int
	}{
		{0, 500}, // never past BatchSize
		{slowAck + time.Millisecond, 250},
		{time.Second, 125},
		{time.Second, 125}, // never under a quarter
		{slowAck / 2, 125},
		{slowAck / 8, 250},
		{slowAck / 8, 500},
		{slowAck / 8, 500},
	}
	for i, s := range steps {
		w.paced(s.took)
		if got := w.readCount(); got != s.want {
			t.Fatalf("step %d: after an ack of %v, reads of %d; want %d", i, s.took, got, s.want)
		}
	}
}

// TestReadsSizedByEntriesAndLingerAfterSmallOnes: a read asks for its
// orders' worth of entries at the size of the last read's entries, at
// least one; after a read that brought orders but under a quarter of the
// batch, the worker waits Linger (here: until its ctx ends) before the
// next; after none, or a large one, or with no Linger, it does not.
func TestReadsSizedByEntriesAndLingerAfterSmallOnes(t *testing.T) {
	w := &worker{c: &Consumer{cfg: Config{BatchSize: 500, Linger: time.Hour}}}
	for _, s := range []struct{ entries, orders, want int }{
		{0, 0, 500}, // nothing read yet: entries of one order
		{4, 500, 4},
		{2, 10, 100},
		{1, 1000, 1},
	} {
		w.learn(s.entries, s.orders)
		if got := w.readEntries(); got != s.want {
			t.Errorf("after a read of %d orders in %d entries, the next asks for %d entries; want %d", s.orders, s.entries, got, s.want)
		}
	}
	for _, s := range []struct {
		orders int
		linger time.Duration
		waits  bool
	}{{0, time.Hour, false}, {124, time.Hour, true}, {125, time.Hour, false}, {1, -1, false}} {
		w.lastRead, w.c.cfg.Linger = s.orders, s.linger
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := w.linger(ctx)
		cancel()
		if waited := err != nil; waited != s.waits {
			t.Errorf("after a read of %d orders, linger %v: waited %v; want %v", s.orders, s.linger, waited, s.waits)
		}
	}
}
