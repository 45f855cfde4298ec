package main

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/strategy"
)

// lockFlags are the stocklock strategy's flags: its lock, the lock's
// lease, and the lab's pause inside the critical section. serve takes one
// --lock; bench a list, one row each.
type lockFlags struct {
	kinds      string
	lease      time.Duration
	pause      time.Duration
	pauseEvery int
}

// realLock is the --lock of package lock, the one that works.
const realLock = "lock"

// brokenLockNames lists the lab's deliberately broken locks.
func brokenLockNames() []string { return slices.Sorted(maps.Keys(lab.BrokenLocks)) }

func (f *lockFlags) register(fs *flag.FlagSet, list bool) {
	what := "stocklock's lock: "
	if list {
		what = "comma-separated locks of stocklock, one row each: "
	}
	fs.StringVar(&f.kinds, "lock", realLock, what+realLock+" (package lock, fenced); lab only, DELIBERATELY BROKEN seed locks: "+
		strings.Join(brokenLockNames(), ", "))
	fs.DurationVar(&f.lease, "lock-lease", 10*time.Second, "stocklock: the fixed lease of its lock")
	fs.DurationVar(&f.pause, "pause", 0, "stocklock, lab only: sleep this long inside the critical section (make it longer than --lock-lease)")
	fs.IntVar(&f.pauseEvery, "pause-every", 20, "stocklock, lab only: pause one acquisition in this many, per instance")
}

// validate checks the flags; stocklock says whether that strategy runs.
func (f *lockFlags) validate(stocklock bool) error {
	for _, k := range splitList(f.kinds) {
		if _, broken := lab.BrokenLocks[k]; k != realLock && !broken {
			return fmt.Errorf("--lock: unknown lock %q (want %s or, lab only, %s)", k, realLock, strings.Join(brokenLockNames(), ", "))
		}
	}
	switch {
	case len(splitList(f.kinds)) == 0:
		return errors.New("--lock names no lock")
	case f.lease <= 0 || f.pause < 0 || f.pauseEvery < 1:
		return errors.New("--lock-lease must be positive, --pause not negative and --pause-every at least 1")
	case !stocklock && (f.kinds != realLock || f.pause > 0):
		return errors.New("--lock and --pause apply to --strategy stocklock")
	}
	return nil
}

// args returns the serve flags of an instance that runs stocklock with
// the lock kind.
func (f *lockFlags) args(kind string) []string {
	return []string{"--lock", kind, "--lock-lease", f.lease.String(), "--pause", f.pause.String(),
		"--pause-every", strconv.Itoa(f.pauseEvery)}
}

// config sets stocklock's fields of cfg: its Locker on b's Redis (the
// broken ones beside the lock client's keys) and the pause.
func (f *lockFlags) config(cfg *strategy.Config, b *backends) error {
	cfg.LockLease, cfg.Pause, cfg.PauseEvery = f.lease, f.pause, f.pauseEvery
	if f.kinds == realLock {
		return nil // strategy.LockLocker(cfg.Locks, lease)
	}
	locker, err := lab.NewBrokenLocker(f.kinds, b.redis, b.prefix+"lock:", f.lease)
	cfg.Locker = locker
	return err
}

// stocklockRuns expands the stocklock entry of a bench's strategies into
// one run per --lock: "stocklock" for the real lock, "stocklock:<kind>"
// for a broken one.
func stocklockRuns(names []string, kinds string) []string {
	var runs []string
	for _, n := range names {
		if n != "stocklock" {
			runs = append(runs, n)
			continue
		}
		for _, k := range splitList(kinds) {
			if k == realLock {
				runs = append(runs, n)
			} else {
				runs = append(runs, n+":"+k)
			}
		}
	}
	return runs
}

// runStrategy splits a bench run name into its strategy and lock kind.
func runStrategy(run string) (name, kind string) {
	name, kind, ok := strings.Cut(run, ":")
	if !ok {
		kind = realLock
	}
	return name, kind
}
