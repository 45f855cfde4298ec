package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrNotObtained means a library gave up acquiring a lock (its retries ran
// out) without a Redis error. The harness counts it as a retry and tries
// again; it is not a failure.
var ErrNotObtained = errors.New("bench: lock not obtained")

// A locker is one lock library behind the harness: Lock blocks, the way the
// library idiomatically waits, until it holds name or gives up
// (ErrNotObtained) or ctx is done; the returned function releases the lock.
type locker interface {
	Lock(ctx context.Context, name string) (unlock func(context.Context) error, err error)
	Close() error
}

// A library names a lock library and opens a locker on it. One locker per
// process; prefix keeps its keys apart from every other library and run.
type library struct {
	name string
	open func(addr, prefix string) (locker, error)
}

// libraries lists every library the benchmarks compare, ours first.
var libraries = []library{
	{"flashsale", openFlashsale},
	{"redsync", openRedsync},
	{"redislock", openRedislock},
	{"rueidislock", openRueidislock},
}

// noLock is the harness's control: a "lock" that excludes nothing, so a
// contended run of it must report violations.
var noLock = library{"nolock", openNoLock}

// libraryNamed returns the library called name.
func libraryNamed(name string) (library, error) {
	if name == noLock.name {
		return noLock, nil
	}
	for _, l := range libraries {
		if l.name == name {
			return l, nil
		}
	}
	return library{}, fmt.Errorf("bench: unknown library %q", name)
}

// noLocker grants every Lock at once, after a pause that keeps the control
// run's sample count small.
type noLocker struct{}

var _ locker = noLocker{}

func openNoLock(string, string) (locker, error) { return noLocker{}, nil }

func (noLocker) Lock(ctx context.Context, _ string) (func(context.Context) error, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(time.Millisecond):
	}
	return func(context.Context) error { return nil }, nil
}

func (noLocker) Close() error { return nil }
