package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	goredislib "github.com/redis/go-redis/v9"
)

// redislockTTL and redislockRetry are what bsm/redislock's own example for
// obtaining with retry uses: a 1s TTL, retry every 100ms, up to 3 times.
// The library has no blocking call of its own; this is its documented way
// to wait.
const redislockTTL = time.Second

func redislockRetry() redislock.RetryStrategy {
	return redislock.LimitRetry(redislock.LinearBackoff(100*time.Millisecond), 3)
}

// redislockLocker is bsm/redislock on one go-redis v9 client.
type redislockLocker struct {
	client *goredislib.Client
	locker *redislock.Client
	prefix string
}

var _ locker = (*redislockLocker)(nil)

func openRedislock(addr, prefix string) (locker, error) {
	c := goredislib.NewClient(&goredislib.Options{Addr: addr})
	return &redislockLocker{client: c, locker: redislock.New(c), prefix: prefix}, nil
}

func (r *redislockLocker) Lock(ctx context.Context, name string) (func(context.Context) error, error) {
	// A strategy has state (the attempt count): one per Obtain.
	l, err := r.locker.Obtain(ctx, r.prefix+name, redislockTTL, &redislock.Options{RetryStrategy: redislockRetry()})
	if errors.Is(err, redislock.ErrNotObtained) {
		return nil, fmt.Errorf("%w: %v", ErrNotObtained, err)
	}
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (r *redislockLocker) Close() error { return r.client.Close() }
