package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// masters starts n private Redis servers and returns them with a lock
// Client on each (prefix p), closed at cleanup.
func masters(t testing.TB, n int, p string) ([]*testenv.RedisServer, []*Client) {
	t.Helper()
	servers := make([]*testenv.RedisServer, n)
	clients := make([]*Client, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); servers[i] = testenv.StartRedis(t) }()
	}
	wg.Wait()
	for i, s := range servers {
		clients[i] = New(s.Client(t), WithPrefix(p))
		t.Cleanup(func() { clients[i].Close() })
	}
	return servers, clients
}

func addrs(servers []*testenv.RedisServer) string {
	a := make([]string, len(servers))
	for i, s := range servers {
		a[i] = s.Addr()
	}
	return strings.Join(a, ",")
}

// TestMultiHelperProcess is not a test: it is the worker of the MultiLock
// process tests (roles "multicount" and "multihold", see helper), on the
// masters in LOCK_HELPER_ADDRS.
func TestMultiHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		return
	}
	var clients []*Client
	var first rueidis.Client
	for _, a := range strings.Split(os.Getenv("LOCK_HELPER_ADDRS"), ",") {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if first == nil {
			first = rc // the counter's master
		}
		clients = append(clients, New(rc, WithPrefix(os.Getenv("LOCK_HELPER_PREFIX"))))
	}
	mm := NewMulti(clients...).Mutex(os.Getenv("LOCK_HELPER_NAME"), WithWatchdog(envDuration("LOCK_HELPER_LEASE", 10*time.Second)))
	ctx := context.Background()
	switch role {
	case "multihold":
		ml, err := mm.Lock(ctx)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("locked", ml.Fence())
		select {}
	case "multicount":
		json.NewEncoder(os.Stdout).Encode(multiCount(ctx, first, mm))
	}
}

// multiCount runs LOCK_HELPER_GOROUTINES goroutines doing
// LOCK_HELPER_ITERATIONS non-atomic increments of LOCK_HELPER_COUNTER (on
// the first master) under mm each.
func multiCount(ctx context.Context, rc rueidis.Client, mm *MultiMutex) helperResult {
	n, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_GOROUTINES"))
	iters, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_ITERATIONS"))
	counter := os.Getenv("LOCK_HELPER_COUNTER")
	startNs, _ := strconv.ParseInt(os.Getenv("LOCK_HELPER_START"), 10, 64)
	time.Sleep(time.Until(time.Unix(0, startNs)))
	var res helperResult
	var mu sync.Mutex
	record := func(read int64, fences []int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			res.Errors = append(res.Errors, err.Error())
			return
		}
		res.Reads = append(res.Reads, read)
		res.Fences = append(res.Fences, fences[0]) // each part's increase is checked via the first
	}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iters {
				ml, err := mm.Lock(ctx)
				if err != nil {
					record(0, nil, err)
					return
				}
				v, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
				if err != nil && !rueidis.IsRedisNil(err) {
					record(0, nil, err)
				}
				runtime.Gosched()
				if err := rc.Do(ctx, rc.B().Set().Key(counter).Value(strconv.FormatInt(v+1, 10)).Build()).Error(); err != nil {
					record(0, nil, err)
				}
				record(v, ml.Fences(), nil)
				if err := ml.Unlock(ctx); err != nil {
					record(0, nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return res
}

func TestMultiMutualExclusionAcrossProcesses(t *testing.T) {
	prefix := "multi:" + testenv.Unique() + ":"
	servers, _ := masters(t, 3, prefix)
	const iterations = 8
	goroutines := []int{10, 10, 10}
	counter := prefix + "counter"
	results := runWorkers(t, "multicount", goroutines, map[string]string{
		"ADDRS":      addrs(servers),
		"PREFIX":     prefix,
		"NAME":       "stock",
		"ITERATIONS": strconv.Itoa(iterations),
		"COUNTER":    counter,
		"START":      strconv.FormatInt(time.Now().Add(300*time.Millisecond).UnixNano(), 10),
	})
	rc := servers[0].Client(t)
	total := 30 * iterations
	got, err := rc.Do(context.Background(), rc.B().Get().Key(counter).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if got != int64(total) {
		t.Fatalf("counter = %d after %d increments under the MultiLock: mutual exclusion violated", got, total)
	}
	type obs struct{ read, fence int64 }
	var all []obs
	for _, r := range results {
		for i := range r.Reads {
			all = append(all, obs{r.Reads[i], r.Fences[i]})
		}
	}
	slices.SortFunc(all, func(a, b obs) int { return int(a.read - b.read) })
	for i, o := range all {
		if o.read != int64(i) || i > 0 && o.fence <= all[i-1].fence {
			t.Fatalf("acquisition #%d read %d with fence %d (previous fence %d)", i, o.read, o.fence, all[max(i-1, 0)].fence)
		}
	}
	// Nothing is left held on any master.
	for i, s := range servers {
		if n := keyCount(t, s.Client(t), prefix+"{stock}"); n != 0 {
			t.Errorf("master %d still has the lock hash", i)
		}
	}
}

// keyCount returns whether key exists (1) or not (0).
func keyCount(t testing.TB, rc rueidis.Client, key string) int64 {
	t.Helper()
	n, err := rc.Do(context.Background(), rc.B().Exists().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMultiRollsBackWhenAMasterIsDown(t *testing.T) {
	prefix := "multi:" + testenv.Unique() + ":"
	servers, clients := masters(t, 3, prefix)
	mm := NewMulti(clients...).Mutex("stock")
	servers[2].Kill()
	// A dead master does not answer: Lock gives up when ctx ends, having
	// held the parts of masters 0 and 1 meanwhile.
	start := time.Now()
	ml, err := mm.Lock(timeout(t, 2*time.Second))
	if err == nil {
		ml.Unlock(context.Background())
		t.Fatal("Lock succeeded with a master down")
	}
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "master 2") {
		t.Fatalf("Lock = %v, want the deadline or the error of master 2", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Lock returned %v after it started, its context ended after 2s", took)
	}
	for i := range 2 {
		if n := keyCount(t, servers[i].Client(t), prefix+"{stock}"); n != 0 {
			t.Errorf("master %d still holds the lock after the rollback", i)
		}
		l := mustTry(t, clients[i].Mutex("stock"))
		mustUnlock(t, l)
	}
}

func mustTry(t testing.TB, m *Mutex) *Lock {
	t.Helper()
	l, err := m.TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock(%s): %v", m.Name(), err)
	}
	return l
}

func TestMultiTryLockRollsBackWhenOnePartIsHeld(t *testing.T) {
	prefix := "multi:" + testenv.Unique() + ":"
	servers, clients := masters(t, 3, prefix)
	other := New(servers[1].Client(t), WithPrefix(prefix)) // another process on master 1
	t.Cleanup(func() { other.Close() })
	held := mustTry(t, other.Mutex("stock"))
	mm := NewMulti(clients...).Mutex("stock")
	if _, err := mm.TryLock(context.Background()); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("TryLock = %v, want ErrNotObtained", err)
	}
	if n := keyCount(t, servers[0].Client(t), prefix+"{stock}"); n != 0 {
		t.Error("master 0 still holds the lock after TryLock failed on master 1")
	}
	// Lock waits for the part held, pushed, not polled: it gets it at the
	// release.
	got := make(chan error, 1)
	go func() {
		ml, err := mm.Lock(timeout(t, 10*time.Second))
		if err == nil {
			err = ml.Unlock(context.Background())
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	mustUnlock(t, held)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

func TestMultiFencesIncrease(t *testing.T) {
	prefix := "multi:" + testenv.Unique() + ":"
	_, clients := masters(t, 3, prefix)
	mm := NewMulti(clients...).Mutex("stock")
	var last []int64
	for range 5 {
		ml, err := mm.Lock(timeout(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		f := ml.Fences()
		if len(f) != 3 || ml.Fence() != f[0] {
			t.Fatalf("Fences() = %v, Fence() = %d", f, ml.Fence())
		}
		for i := range last {
			if f[i] <= last[i] {
				t.Fatalf("fences %v after %v: master %d did not increase", f, last, i)
			}
		}
		last = f
		if err := ml.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := ml.Unlock(context.Background()); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
		}
		if cause := context.Cause(ml.Context()); cause != context.Canceled {
			t.Fatalf("Context cause after Unlock = %v", cause)
		}
	}
}

func TestMultiLostWhenAMasterDies(t *testing.T) {
	prefix := "multi:" + testenv.Unique() + ":"
	servers, clients := masters(t, 3, prefix)
	mm := NewMulti(clients...).Mutex("stock", WithWatchdog(600*time.Millisecond))
	ml, err := mm.Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	servers[1].Kill()
	select {
	case <-ml.Lost():
	case <-time.After(5 * time.Second):
		t.Fatal("MultiLock not lost 5s after master 1 died (lease 600ms)")
	}
	if cause := context.Cause(ml.Context()); !errors.Is(cause, ErrLost) {
		t.Fatalf("Context cause = %v, want ErrLost", cause)
	}
	if err := ml.Unlock(context.Background()); err == nil {
		t.Fatal("Unlock of a lost MultiLock returned nil")
	}
	for _, i := range []int{0, 2} {
		if n := keyCount(t, servers[i].Client(t), prefix+"{stock}"); n != 0 {
			t.Errorf("master %d still holds its part after Unlock", i)
		}
	}
}

func TestMultiKilledHolderFreesAfterLease(t *testing.T) {
	prefix := "multi:" + testenv.Unique() + ":"
	servers, clients := masters(t, 3, prefix)
	cmd, out := helper(t, "multihold", map[string]string{"ADDRS": addrs(servers), "PREFIX": prefix, "NAME": "stock", "LEASE": "1s"})
	line := readLine(t, out)
	fence, err := strconv.ParseInt(strings.TrimPrefix(line, "locked "), 10, 64)
	if err != nil {
		t.Fatalf("worker said %q", line)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed := time.Now()
	mm := NewMulti(clients...).Mutex("stock")
	if _, err := mm.TryLock(context.Background()); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("TryLock right after the holder died = %v, want ErrNotObtained", err)
	}
	ml, err := mm.Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer ml.Unlock(context.Background())
	if waited := time.Since(killed); waited > 4*time.Second {
		t.Errorf("took %v after the holder died (lease 1s)", waited)
	}
	if ml.Fence() <= fence {
		t.Errorf("fence %d after the dead holder's %d", ml.Fence(), fence)
	}
}

func TestMultiWaiterWokenAfterPubSubCut(t *testing.T) {
	prefix := "multi:" + testenv.Unique() + ":"
	servers, clients := masters(t, 2, prefix)
	// Master 0 of the waiter is the test Redis behind a proxy that cuts
	// its connections, the subscription's too.
	proxy := testenv.StartProxy(t)
	// One connection (Proxy.Client): with several, one the cut closed while
	// idle is found dead only by the next command on it, which then fails
	// with EOF; that is a broken connection, not what this test is about.
	waiterC := New(proxy.Client(t), WithPrefix(prefix))
	t.Cleanup(func() { waiterC.Close() })
	holderC := sibling(t, prefix) // the test Redis, directly
	holder := NewMulti(holderC, clients[0], clients[1]).Mutex("stock")
	w1, w2 := New(servers[0].Client(t), WithPrefix(prefix)), New(servers[1].Client(t), WithPrefix(prefix))
	t.Cleanup(func() { w1.Close(); w2.Close() })
	waiter := NewMulti(waiterC, w1, w2).Mutex("stock")
	ml, err := holder.Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wl, err := waiter.Lock(timeout(t, 20*time.Second))
		if err == nil {
			err = wl.Unlock(context.Background())
		}
		got <- err
	}()
	time.Sleep(300 * time.Millisecond) // the waiter queues on master 0
	proxy.Cut()
	released := time.Now()
	if err := ml.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken 10s after the release with its subscription cut")
	}
	t.Logf("waiter woke %v after the release", time.Since(released))
}

// TestMultiMutualExclusionOnCluster takes a MultiLock whose parts are a
// lock on a Redis Cluster and one on a separate Redis, from 3 Clients (one
// per part each, as 3 processes would have) with 8 goroutines each, and
// checks the non-atomic increments made under it and the fences of both
// parts.
func TestMultiMutualExclusionOnCluster(t *testing.T) {
	cluster := testenv.SharedCluster(t)
	crc, prefix := cluster.PrefixedClient(t)
	single := testenv.StartRedis(t)
	const clients, goroutines, iterations = 3, 8, 6
	counter := prefix + "counter"
	var mu sync.Mutex
	var reads [][3]int64 // value read, fence on the cluster, fence on the single Redis
	var wg sync.WaitGroup
	for range clients {
		parts := []*Client{New(cluster.Client(t), WithPrefix(prefix)), New(single.Client(t), WithPrefix(prefix))}
		for _, c := range parts {
			t.Cleanup(func() { c.Close() })
		}
		mm := NewMulti(parts...).Mutex("stock")
		for range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range iterations {
					ml, err := mm.Lock(timeout(t, 30*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					v, err := crc.Do(context.Background(), crc.B().Get().Key(counter).Build()).AsInt64()
					if err != nil && !rueidis.IsRedisNil(err) {
						t.Error(err)
					}
					runtime.Gosched()
					if err := crc.Do(context.Background(), crc.B().Set().Key(counter).Value(strconv.FormatInt(v+1, 10)).Build()).Error(); err != nil {
						t.Error(err)
					}
					f := ml.Fences()
					mu.Lock()
					reads = append(reads, [3]int64{v, f[0], f[1]})
					mu.Unlock()
					if err := ml.Unlock(context.Background()); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.SortFunc(reads, func(a, b [3]int64) int { return int(a[0] - b[0]) })
	if len(reads) != clients*goroutines*iterations {
		t.Fatalf("%d acquisitions, want %d", len(reads), clients*goroutines*iterations)
	}
	for i, r := range reads {
		if r[0] != int64(i) {
			t.Fatalf("acquisition #%d read counter %d: mutual exclusion violated", i, r[0])
		}
		if i > 0 && (r[1] <= reads[i-1][1] || r[2] <= reads[i-1][2]) {
			t.Fatalf("fences %v at counter %d after %v: not increasing", r[1:], r[0], reads[i-1][1:])
		}
	}
}
