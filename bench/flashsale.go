package bench

import (
	"context"
	"fmt"

	"github.com/flashsale/flashsale/lock"
	"github.com/redis/rueidis"
)

// flashsaleLocker is our lock library with its defaults (watchdog lease) on
// a rueidis client with default options.
type flashsaleLocker struct {
	rc     rueidis.Client
	client *lock.Client
}

var _ locker = (*flashsaleLocker)(nil)

func openFlashsale(addr, prefix string) (locker, error) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return nil, fmt.Errorf("flashsale: %w", err)
	}
	return &flashsaleLocker{rc: rc, client: lock.New(rc, lock.WithPrefix(prefix))}, nil
}

// Lock waits with Mutex.Lock, the library's blocking call; it gives up only
// when ctx is done.
func (f *flashsaleLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	l, err := f.client.Mutex(name).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		select {
		case <-l.Lost():
			return fmt.Errorf("flashsale: lock lost while held: %w", context.Cause(l.Context()))
		default:
		}
		return l.Unlock(ctx)
	}, nil
}

func (f *flashsaleLocker) Close() error {
	err := f.client.Close()
	f.rc.Close()
	return err
}
