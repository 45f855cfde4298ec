package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lock"
	"github.com/redis/rueidis"
)

// connect returns a rueidis client of the test Redis and a function that
// deletes the example's keys and closes it.
func connect() (rueidis.Client, string, func()) {
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{testenv.RedisAddr()}})
	if err != nil {
		panic(err)
	}
	prefix := "example:" + testenv.Unique() + ":"
	return rc, prefix, func() {
		testenv.DeletePrefix(context.Background(), rc, prefix)
		rc.Close()
	}
}

func Example() {
	rc, prefix, done := connect()
	defer done()
	ctx := context.Background()

	locks := lock.New(rc, lock.WithPrefix(prefix)) // one per process
	defer locks.Close()

	l, err := locks.Mutex("order:42").Lock(ctx)
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	// Work under l.Context(): it is cancelled if the lock is lost.
	fmt.Println("holding", l.Name(), "fence > 0:", l.Fence() > 0)
	if err := l.Unlock(ctx); err != nil {
		fmt.Println("unlock:", err)
	}
	// Output: holding order:42 fence > 0: true
}

func ExampleMutex_TryLock() {
	rc, prefix, done := connect()
	defer done()
	ctx := context.Background()
	locks := lock.New(rc, lock.WithPrefix(prefix))
	defer locks.Close()

	m := locks.Mutex("coupon:7")
	first, _ := m.TryLock(ctx)
	_, err := m.TryLock(ctx)
	fmt.Println(errors.Is(err, lock.ErrNotObtained))
	first.Unlock(ctx)
	again, err := m.TryLock(ctx)
	fmt.Println(err, again.Fence() > first.Fence())
	again.Unlock(ctx)
	// Output:
	// true
	// <nil> true
}

func ExampleMutex_Lock_timeout() {
	rc, prefix, done := connect()
	defer done()
	locks := lock.New(rc, lock.WithPrefix(prefix))
	defer locks.Close()

	holder, _ := locks.Mutex("stock").Lock(context.Background())
	defer holder.Unlock(context.Background())

	// Give up waiting after 50ms.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := locks.Mutex("stock").Lock(ctx)
	fmt.Println(err)
	// Output: context deadline exceeded
}

func ExampleLock_Context() {
	rc, prefix, done := connect()
	defer done()
	locks := lock.New(rc, lock.WithPrefix(prefix))
	defer locks.Close()

	l, _ := locks.Mutex("user:9").Lock(context.Background())
	ctx := l.Context()

	// Code called with ctx that locks the same mutex re-enters it instead
	// of waiting for itself; each Lock needs its Unlock.
	inner, _ := locks.Mutex("user:9").Lock(ctx)
	fmt.Println(inner == l)
	inner.Unlock(ctx)
	fmt.Println(ctx.Err())
	l.Unlock(context.Background())
	fmt.Println(ctx.Err())
	// Output:
	// true
	// <nil>
	// context canceled
}

func ExampleLock_Fence() {
	rc, prefix, done := connect()
	defer done()
	ctx := context.Background()
	locks := lock.New(rc, lock.WithPrefix(prefix))
	defer locks.Close()

	// A store that remembers the highest fence it accepted refuses writes
	// from a holder whose lease ran out while it was paused: in SQL,
	//   UPDATE t SET v = ?, fence = ? WHERE id = ? AND fence < ?
	var highest int64
	write := func(l *lock.Lock) bool {
		if l.Fence() <= highest {
			return false
		}
		highest = l.Fence()
		return true
	}

	stale, _ := locks.Mutex("row:1", lock.WithLease(50*time.Millisecond)).Lock(ctx)
	fmt.Println("first write:", write(stale))
	<-stale.Lost() // paused past its lease
	fresh, _ := locks.Mutex("row:1").Lock(ctx)
	fmt.Println("new holder's write:", write(fresh))
	fmt.Println("stale write:", write(stale))
	fmt.Println("stale unlock:", stale.Unlock(ctx))
	fresh.Unlock(ctx)
	// Output:
	// first write: true
	// new holder's write: true
	// stale write: false
	// stale unlock: lock: not held
}
