package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	goredislib "github.com/redis/go-redis/v9"
)

// redsyncLocker is go-redsync/redsync on one go-redis v9 client with the
// mutex defaults: 8s expiry, 32 tries, a random 50–250ms delay between them.
type redsyncLocker struct {
	client *goredislib.Client
	rs     *redsync.Redsync
	prefix string
}

var _ locker = (*redsyncLocker)(nil)

func openRedsync(addr, prefix string) (locker, error) {
	c := goredislib.NewClient(&goredislib.Options{Addr: addr})
	return &redsyncLocker{client: c, rs: redsync.New(goredis.NewPool(c)), prefix: prefix}, nil
}

// Lock takes a fresh Mutex each time: a redsync Mutex holds the token of one
// acquisition and must not be shared between goroutines.
func (r *redsyncLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	m := r.rs.NewMutex(r.prefix + name)
	if err := m.LockContext(ctx); err != nil {
		var taken *redsync.ErrTaken
		var nodeTaken *redsync.ErrNodeTaken
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken) {
			return nil, fmt.Errorf("%w: %v", ErrNotObtained, err)
		}
		return nil, err
	}
	return func(ctx context.Context) error {
		ok, err := m.UnlockContext(ctx)
		if err == nil && !ok {
			err = errors.New("redsync: unlock failed")
		}
		return err
	}, nil
}

func (r *redsyncLocker) Close() error { return r.client.Close() }
