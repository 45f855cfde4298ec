package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// interval is one hold of the lock in wall-clock nanoseconds: from just
// after Lock returned to just before Unlock was called. Every process on
// the machine reads the same clock, so intervals from different processes
// compare; and each lies inside a true holding period, so with a correct
// lock no two can overlap.
type interval struct {
	Start int64 `json:"s"`
	End   int64 `json:"e"`
}

// workerResult is what one worker process reports to the parent.
type workerResult struct {
	Library string     `json:"library"`
	Counts  []int64    `json:"counts"`  // acquisitions, one entry per goroutine
	Retries int64      `json:"retries"` // acquisitions the library gave up on
	Waits   []int64    `json:"waits"`   // ns from first attempt to holding, per acquisition
	Holds   []interval `json:"holds"`
	Errors  []string   `json:"errors,omitempty"` // Redis errors and failed unlocks
}

// goroutineResult is what one contending goroutine saw.
type goroutineResult struct {
	acquisitions int64
	retries      int64
	waits        []int64
	holds        []interval
	err          error
}

// warmUp has n goroutines lock and unlock a key of their own once, so that
// connections are dialled and subscriptions made before the clock starts:
// go-redis dials lazily, and a lock that wakes waiters by pub/sub would
// otherwise start the run without its subscription.
func warmUp(l locker, key string, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			name := fmt.Sprintf("%s:warm:%d:%d", key, os.Getpid(), i)
			unlock, err := l.Lock(ctx, name)
			if err == nil {
				err = unlock(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: warm-up: %w", err)
	}
	return nil
}

// runWorker waits for start, then has n goroutines contend for key on l
// until start+d, and merges what they saw.
func runWorker(l locker, key string, n int, start time.Time, d time.Duration) workerResult {
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(d))
	defer cancel()
	// Unlocks get their own context: a hold that began just before the end
	// must still be released, not abandoned.
	uctx, ucancel := context.WithTimeout(context.Background(), time.Until(start)+d+time.Minute)
	defer ucancel()
	time.Sleep(time.Until(start))

	per := make([]goroutineResult, n)
	var wg sync.WaitGroup
	for i := range per {
		wg.Go(func() { per[i] = contend(ctx, uctx, l, key) })
	}
	wg.Wait()

	var r workerResult
	for _, g := range per {
		r.Counts = append(r.Counts, g.acquisitions)
		r.Retries += g.retries
		r.Waits = append(r.Waits, g.waits...)
		r.Holds = append(r.Holds, g.holds...)
		if g.err != nil {
			r.Errors = append(r.Errors, g.err.Error())
		}
	}
	return r
}

// holdFor is how long the critical section keeps the lock. It is tiny
// against a Redis round trip, so the benchmark measures the lock, not the
// work under it; but it is not zero, so that overlapping holds (a broken
// lock) show as overlapping intervals.
const holdFor = 5 * time.Microsecond

// criticalSection spins (a sleep would be far longer than holdFor) until
// holdFor has passed since acquired, and returns the time it ends.
func criticalSection(acquired time.Time) time.Time {
	for {
		if now := time.Now(); now.Sub(acquired) >= holdFor {
			return now
		}
	}
}

// contend loops Lock, a tiny critical section, Unlock until ctx is done.
// A wait runs from the first attempt to holding the lock, across any
// attempts the library gave up on, because that is what its caller waits.
// A wait still open when the run ends is not recorded. The first Redis
// error or failed unlock ends the goroutine; the run then fails.
func contend(ctx, uctx context.Context, l locker, key string) (r goroutineResult) {
	t0 := time.Now()
	for ctx.Err() == nil {
		unlock, err := l.Lock(ctx, key)
		switch {
		case err != nil && ctx.Err() != nil:
			return r
		case errors.Is(err, ErrNotObtained):
			r.retries++
			continue
		case err != nil:
			r.err = fmt.Errorf("lock: %w", err)
			return r
		}
		acquired := time.Now()
		releasing := criticalSection(acquired)
		r.acquisitions++
		r.waits = append(r.waits, int64(acquired.Sub(t0)))
		r.holds = append(r.holds, interval{acquired.UnixNano(), releasing.UnixNano()})
		if err := unlock(uctx); err != nil {
			r.err = fmt.Errorf("unlock: %w", err)
			return r
		}
		t0 = time.Now()
	}
	return r
}
