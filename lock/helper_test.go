package lock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// newTestClient returns a lock Client on a test-unique prefix, the rueidis
// client under it and the prefix. Both are closed at cleanup.
func newTestClient(t testing.TB, opts ...Option) (*Client, rueidis.Client, string) {
	t.Helper()
	rc, prefix := testenv.Redis(t)
	c := New(rc, append([]Option{WithPrefix(prefix)}, opts...)...)
	t.Cleanup(func() { c.Close() })
	return c, rc, prefix
}

// sibling returns another lock Client (another "process") on the same
// prefix, with its own rueidis client.
func sibling(t testing.TB, prefix string, opts ...Option) *Client {
	t.Helper()
	rc, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		t.Fatal(err)
	}
	c := New(rc, append([]Option{WithPrefix(prefix)}, opts...)...)
	t.Cleanup(func() { c.Close(); rc.Close() })
	return c
}

func timeout(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustLock(t testing.TB, ctx context.Context, m *Mutex) *Lock {
	t.Helper()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock(%s): %v", m.Name(), err)
	}
	return l
}

func mustUnlock(t testing.TB, l *Lock) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock(%s): %v", l.Name(), err)
	}
}

// wantNotObtained asserts that m cannot be taken right now.
func wantNotObtained(t testing.TB, m *Mutex) {
	t.Helper()
	l, err := m.TryLock(context.Background())
	if !errors.Is(err, ErrNotObtained) {
		if err == nil {
			l.Unlock(context.Background())
		}
		t.Fatalf("TryLock(%s) = %v, want ErrNotObtained", m.Name(), err)
	}
}

// queued returns the number of entries in m's wait queue in Redis.
func queued(t testing.TB, rc rueidis.Client, m *Mutex) int64 {
	t.Helper()
	q, err := rc.Do(context.Background(), rc.B().Zcard().Key(m.keyList[1]).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return q
}
