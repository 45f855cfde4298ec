package lock

import (
	"database/sql"
	"errors"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/flashsale/flashsale/internal/testenv"
)

func TestFencesIncreaseAcrossHoldersAndLostFenceKey(t *testing.T) {
	c, rc, prefix := newTestClient(t)
	other := sibling(t, prefix)
	ctx := timeout(t, 10*time.Second)
	clients := []*Client{c, other}
	var last int64
	take := func(i int) {
		t.Helper()
		m := clients[i%2].Mutex("a")
		l := mustLock(t, ctx, m)
		if l.Fence() <= last {
			t.Fatalf("acquisition %d: fence %d after %d", i, l.Fence(), last)
		}
		// The fence stored with the lock is the one handed out, exactly.
		stored, err := rc.Do(ctx, rc.B().Hget().Key(m.keyList[0]).Field("fence").Build()).AsInt64()
		if err != nil || stored != l.Fence() {
			t.Fatalf("stored fence %d, %v; Fence() %d", stored, err, l.Fence())
		}
		last = l.Fence()
		mustUnlock(t, l)
	}
	for i := range 10 {
		take(i)
	}
	// Re-entries share their acquisition's fence.
	l := mustLock(t, ctx, c.Mutex("a"))
	again := mustLock(t, l.Context(), c.Mutex("a"))
	if again.Fence() != l.Fence() {
		t.Fatalf("re-entry fence %d, acquisition's %d", again.Fence(), l.Fence())
	}
	last = l.Fence()
	mustUnlock(t, l)
	mustUnlock(t, l)

	// Forgetting the fence key (retention passed, eviction) must not make
	// fences go backwards.
	if err := rc.Do(ctx, rc.B().Del().Key(c.Mutex("a").keyList[2]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		take(i)
	}
	// A short retention forgets the fence quickly; still increasing.
	short := c.Mutex("a", WithFenceRetention(time.Second))
	ttl, err := func() (int64, error) {
		l := mustLock(t, ctx, short)
		defer mustUnlock(t, l)
		if l.Fence() <= last {
			t.Fatalf("fence %d after %d", l.Fence(), last)
		}
		last = l.Fence()
		return rc.Do(ctx, rc.B().Pttl().Key(short.keyList[2]).Build()).AsInt64()
	}()
	if err != nil || ttl <= 0 {
		t.Fatalf("fence key PTTL = %d, %v; want a retention TTL", ttl, err)
	}
}

// TestFenceRejectsStaleWrite shows the use of fencing tokens: a holder that
// paused past its lease still believes it holds the lock, but its write,
// guarded by its fence, loses to the newer holder's.
func TestFenceRejectsStaleWrite(t *testing.T) {
	c, _, prefix := newTestClient(t)
	other := sibling(t, prefix)
	db, err := sql.Open("mysql", testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := timeout(t, 20*time.Second)
	if _, err := db.ExecContext(ctx, `CREATE TABLE stock (id INT PRIMARY KEY, v INT NOT NULL, fence BIGINT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO stock VALUES (1, 100, 0)`); err != nil {
		t.Fatal(err)
	}
	// write is the protected update: it applies only if no newer holder wrote.
	write := func(l *Lock, v int) (bool, error) {
		res, err := db.ExecContext(ctx, `UPDATE stock SET v = ?, fence = ? WHERE id = 1 AND fence < ?`, v, l.Fence(), l.Fence())
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		return n == 1, err
	}

	stale := mustLock(t, ctx, c.Mutex("stock:1", WithLease(200*time.Millisecond)))
	if ok, err := write(stale, 99); err != nil || !ok {
		t.Fatalf("first holder's write = %v, %v", ok, err)
	}
	// The first holder pauses past its lease (GC, swap, a slow call)...
	<-stale.Lost()
	fresh := mustLock(t, ctx, other.Mutex("stock:1"))
	if ok, err := write(fresh, 98); err != nil || !ok {
		t.Fatalf("new holder's write = %v, %v", ok, err)
	}
	// ... and wakes up to write again: refused.
	if ok, err := write(stale, 97); err != nil || ok {
		t.Fatalf("stale holder's write = %v, %v; want refused", ok, err)
	}
	if err := stale.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("stale Unlock = %v, want ErrNotHeld", err)
	}
	var v int
	var fence int64
	if err := db.QueryRowContext(ctx, `SELECT v, fence FROM stock WHERE id = 1`).Scan(&v, &fence); err != nil {
		t.Fatal(err)
	}
	if v != 98 || fence != fresh.Fence() {
		t.Fatalf("row = (v %d, fence %d), want (98, %d)", v, fence, fresh.Fence())
	}
	mustUnlock(t, fresh)
}
