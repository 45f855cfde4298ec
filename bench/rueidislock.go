package bench

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// rueidislockLocker is rueidis/rueidislock with KeyMajority 1, as its README
// says for a single Redis, and every other option at its default (5s
// validity extended every 2.5s; client-side caching on, so waiters wake on
// the invalidation of the released key).
//
// The README's example also sets NoLoopTracking. We leave it off: with it,
// rueidis v1.0.79 loses wake-ups — a few in every 10^5 acquisitions of
// 64 goroutines, each on its own free key, blocked until their context
// ended — which hung the uncontended benchmark.
type rueidislockLocker struct {
	locker rueidislock.Locker
}

var _ locker = (*rueidislockLocker)(nil)

func openRueidislock(addr, prefix string) (locker, error) {
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{
		ClientOption: rueidis.ClientOption{InitAddress: []string{addr}},
		KeyPrefix:    prefix + "rueidislock", // keys are <KeyPrefix>:<i>:<name>
		KeyMajority:  1,
	})
	if err != nil {
		return nil, fmt.Errorf("rueidislock: %w", err)
	}
	return &rueidislockLocker{locker: l}, nil
}

// Lock waits with WithContext, the library's blocking call. rueidislock
// releases a lock as soon as the context it was obtained with ends, so ctx
// may only bound the wait: the lock is obtained with a context that stops
// at ctx's end only until WithContext returns.
func (r *rueidislockLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	stopWaiting := context.AfterFunc(ctx, stop)
	held, cancel, err := r.locker.WithContext(wctx, name)
	if !stopWaiting() {
		// ctx ended first: either the wait was cut short, or the lock just
		// obtained is already being released with wctx. Not a hold either way.
		if err == nil {
			cancel()
		}
		stop()
		return nil, ctx.Err()
	}
	if err != nil {
		stop()
		return nil, err
	}
	return func(context.Context) error {
		// held is cancelled as soon as the lock is lost; if that happened
		// before we let go, the hold was not exclusive.
		lost := held.Err()
		cancel()
		stop()
		if lost != nil {
			return fmt.Errorf("rueidislock: lock lost while held: %w", lost)
		}
		return nil
	}, nil
}

func (r *rueidislockLocker) Close() error {
	r.locker.Close()
	return nil
}
