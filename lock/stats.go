package lock

import (
	"sync/atomic"
	"time"
)

// WaitBuckets are the upper bounds of the buckets Stats.Wait counts Lock's
// waits in; a last bucket, past them, counts the longer ones. They span a
// local handoff (microseconds) to a wait behind a slow holder (seconds).
var WaitBuckets = [...]time.Duration{
	50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// Stats are a Client's counters since it was made. Each counter is
// consistent on its own; a snapshot taken while locks move may be a few
// counts apart between counters.
type Stats struct {
	// Acquired counts acquisitions: the Locks Lock and TryLock obtained
	// (re-entries are not counted; a lock handed to a Lock call as it gave
	// up, and passed on at once, is).
	Acquired uint64
	// Turns counts acquisitions Redis granted this Client; the others
	// were local handoffs within a turn.
	Turns uint64
	// LocalHandoffs counts acquisitions handed over within a turn, with
	// no Redis call.
	LocalHandoffs uint64
	// Lost counts acquisitions lost while held (see Lock.Lost).
	Lost uint64
	// Wait is how long Lock calls that obtained a new Lock took.
	Wait WaitHistogram
}

// WaitHistogram counts durations in the buckets of WaitBuckets.
type WaitHistogram struct {
	// Counts[i] counts the waits of at most WaitBuckets[i] and more than
	// the bound before; the last counts those above every bound.
	Counts [len(WaitBuckets) + 1]uint64
	// Sum is the total of the waits.
	Sum time.Duration
}

// Count returns the number of waits counted.
func (h WaitHistogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// stats holds a Client's counters. Each is one atomic add where it
// happens, so the hot path pays no lock for them.
type stats struct {
	acquired, turns, handoffs, lost atomic.Uint64
	waits                           [len(WaitBuckets) + 1]atomic.Uint64
	waitSum                         atomic.Int64 // ns
}

// waited records a Lock call that obtained the lock after d.
func (s *stats) waited(d time.Duration) {
	i := 0
	for i < len(WaitBuckets) && d > WaitBuckets[i] {
		i++
	}
	s.waits[i].Add(1)
	s.waitSum.Add(int64(d))
}

// Stats returns the Client's counters.
func (c *Client) Stats() Stats {
	s := Stats{
		Acquired:      c.stats.acquired.Load(),
		Turns:         c.stats.turns.Load(),
		LocalHandoffs: c.stats.handoffs.Load(),
		Lost:          c.stats.lost.Load(),
	}
	for i := range s.Wait.Counts {
		s.Wait.Counts[i] = c.stats.waits[i].Load()
	}
	s.Wait.Sum = time.Duration(c.stats.waitSum.Load())
	return s
}

// timeLock records, for a Lock call begun at start, its wait if it
// obtained a new Lock (*err is nil).
func (s *stats) timeLock(start time.Time, err *error) {
	if *err == nil {
		s.waited(time.Since(start))
	}
}
