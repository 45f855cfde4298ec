package lock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// sentinelClients starts a Sentinel set and returns it with two lock
// Clients on it, each with its own Sentinel-aware rueidis client: a
// holder's and another process's.
func sentinelClients(t *testing.T) (*testenv.SentinelSet, *Client, *Client) {
	t.Helper()
	// The replica may be stopped while the primary writes: no limit cuts
	// its link meanwhile.
	set := testenv.StartSentinelSet(t, testenv.WithConfig("client-output-buffer-limit", "replica 0 0 0"))
	set.WaitReplicaSync(t) // a replica still syncing acknowledges nothing
	prefix := "failover:" + testenv.Unique() + ":"
	var cs [2]*Client
	for i := range cs {
		cs[i] = New(set.Client(t), WithPrefix(prefix))
		t.Cleanup(func() { cs[i].Close() })
	}
	return set, cs[0], cs[1]
}

// pause stops the Redis process s (SIGSTOP) and returns the function that
// resumes it (SIGCONT), which also runs at cleanup.
func pause(t *testing.T, s *testenv.RedisServer) func() {
	t.Helper()
	rc := s.Client(t)
	info, err := rc.Do(context.Background(), rc.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(info, "process_id:")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]))
	if err != nil {
		t.Fatalf("no process_id in INFO: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	resume := func() { once.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) }
	t.Cleanup(resume)
	return resume
}

// fencedWrite is a resource that refuses fencing tokens not above the
// highest it has accepted: it reports whether it took the write.
func fencedWrite(t *testing.T, rc rueidis.Client, key string, fence int64) bool {
	t.Helper()
	const script = `if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1]) return 1 end return 0`
	n, err := rueidis.NewLuaScript(script).Exec(context.Background(), rc, []string{key}, []string{strconv.FormatInt(fence, 10)}).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestWithReplicasLockSurvivesFailover(t *testing.T) {
	set, a, b := sentinelClients(t)
	const lease = 12 * time.Second
	holder := a.Mutex("stock", WithReplicas(1, 2*time.Second), WithLease(lease))
	acquired := time.Now() // the lease starts after this, in Redis
	l, err := holder.Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Lock with WithReplicas took %v", time.Since(acquired))
	old := set.KillPrimary()
	set.WaitFailover(t, old.Addr(), 30*time.Second)

	other := b.Mutex("stock")
	for time.Since(acquired) < lease-time.Second {
		if ol, err := other.TryLock(timeout(t, 5*time.Second)); err == nil {
			t.Fatalf("another client took the lock (fence %d) %v after the holder's (fence %d), whose lease is %v: the failover lost it",
				ol.Fence(), time.Since(acquired), l.Fence(), lease)
		} else if !errors.Is(err, ErrNotObtained) {
			t.Logf("TryLock during the failover: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ol, err := other.Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ol.Unlock(context.Background())
	if ol.Fence() <= l.Fence() {
		t.Errorf("fence %d after the holder's %d", ol.Fence(), l.Fence())
	}
	select {
	case <-l.Lost():
	default:
		t.Error("the holder's Lost is open while another client holds the lock")
	}
}

func TestWithoutReplicasFailoverOverlapsAndTheFenceRefusesTheStaleHolder(t *testing.T) {
	set, a, b := sentinelClients(t)
	primary := set.Primary()
	// The replica stops reading; what the primary sends it fills the
	// socket buffers and then waits in the primary's memory, so the
	// acquisition below never reaches the replica before the primary dies.
	resume := pause(t, set.Replica())
	prc := primary.Client(t)
	junk := strings.Repeat("x", 1<<20)
	for i := range 32 {
		if err := prc.Do(context.Background(), prc.B().Set().Key("junk:"+strconv.Itoa(i)).Value(junk).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	const lease = 30 * time.Second
	l, err := a.Mutex("stock", WithLease(lease)).Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	primary.Kill()
	resume()
	set.WaitFailover(t, primary.Addr(), 30*time.Second)

	ol, err := b.Mutex("stock").Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ol.Unlock(context.Background())
	select {
	case <-l.Lost():
		t.Fatal("the holder was told it lost the lock: no overlap to show")
	default:
	}
	t.Logf("overlap: the holder (fence %d, fixed lease %v) and another client (fence %d) both hold the lock", l.Fence(), lease, ol.Fence())

	// The resource: the new holder writes first, then the stale one tries.
	rc, prefix := testenv.Redis(t)
	key := prefix + "resource"
	if !fencedWrite(t, rc, key, ol.Fence()) {
		t.Fatalf("the new holder's write (fence %d) was refused", ol.Fence())
	}
	if fencedWrite(t, rc, key, l.Fence()) {
		t.Fatalf("the stale holder's write (fence %d) was accepted after the new holder's (fence %d)", l.Fence(), ol.Fence())
	}
}

func TestWithReplicasRefusesWhatReplicasDoNotConfirm(t *testing.T) {
	set, a, b := sentinelClients(t)
	// Two acknowledgements wanted, one replica: Lock fails and leaves
	// nothing held.
	m := a.Mutex("stock", WithReplicas(2, 200*time.Millisecond))
	if l, err := m.Lock(timeout(t, 10*time.Second)); !errors.Is(err, ErrNotReplicated) {
		if err == nil {
			l.Unlock(context.Background())
		}
		t.Fatalf("Lock = %v, want ErrNotReplicated", err)
	}
	if l, err := m.TryLock(timeout(t, 10*time.Second)); !errors.Is(err, ErrNotReplicated) {
		if err == nil {
			l.Unlock(context.Background())
		}
		t.Fatalf("TryLock = %v, want ErrNotReplicated", err)
	}
	ol := mustTry(t, b.Mutex("stock"))
	mustUnlock(t, ol)

	// A held lock whose renewals the replica stops confirming is lost
	// when the lease it confirmed runs out.
	const lease = 2 * time.Second
	l, err := a.Mutex("held", WithReplicas(1, 500*time.Millisecond), WithWatchdog(lease)).Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resume := pause(t, set.Replica())
	defer resume()
	select {
	case <-l.Lost():
		if took := time.Since(stopped); took < lease/2 {
			t.Errorf("lost %v after the replica stopped, before the confirmed lease (%v) could end", took, lease)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was not lost 10s after the replica stopped confirming its renewals (lease 2s)")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, ErrLost) {
		t.Fatalf("Context cause = %v, want ErrLost", cause)
	}
}
