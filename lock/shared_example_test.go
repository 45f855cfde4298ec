package lock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/flashsale/flashsale/lock"
)

func ExampleRWMutex() {
	rc, prefix, done := connect()
	defer done()
	ctx := context.Background()
	locks := lock.New(rc, lock.WithPrefix(prefix))
	defer locks.Close()

	prices := locks.RWMutex("prices")
	r1, _ := prices.RLock(ctx) // readers share the lock
	r2, _ := prices.RLock(ctx)
	_, err := prices.TryLock(ctx) // a writer must wait for both
	fmt.Println(errors.Is(err, lock.ErrNotObtained))
	r1.Unlock(ctx)
	r2.Unlock(ctx)

	w, _ := prices.Lock(ctx) // exclusive, fenced
	fmt.Println(w.Writer(), w.Fence() > 0)
	w.Unlock(ctx)
	// Output:
	// true
	// true true
}

func ExampleSemaphore() {
	rc, prefix, done := connect()
	defer done()
	ctx := context.Background()
	locks := lock.New(rc, lock.WithPrefix(prefix))
	defer locks.Close()

	// At most 2 exports at once, across every process using this name.
	exports := locks.Semaphore("exports", 2)
	a, _ := exports.Acquire(ctx)
	b, _ := exports.Acquire(ctx)
	_, err := exports.TryAcquire(ctx)
	fmt.Println(errors.Is(err, lock.ErrNotObtained))
	a.Release(ctx) // the next waiter, if any, is woken by a push

	exports.SetPermits(ctx, 3)
	n, _ := exports.Permits(ctx)
	fmt.Println(n)
	b.Release(ctx)
	// Output:
	// true
	// 3
}
