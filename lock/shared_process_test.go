package lock

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// sharedHelper runs the RWMutex and Semaphore roles of TestHelperProcess:
// "rwhold" and "semhold" take a hold (LOCK_HELPER_KIND "w" for the write
// lock), say so and wait to be killed; "rwwait" queues
// LOCK_HELPER_GOROUTINES writers, says so and waits to be killed; "rwcount" and "semcount" run
// LOCK_HELPER_GOROUTINES goroutines of LOCK_HELPER_ITERATIONS holds each
// and report a helperResult.
func sharedHelper(ctx context.Context, rc rueidis.Client, c *Client, role string) {
	name := os.Getenv("LOCK_HELPER_NAME")
	lease := WithWatchdog(envDuration("LOCK_HELPER_LEASE", 10*time.Second))
	permits, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_PERMITS"))
	rw, sem := c.RWMutex(name, lease), c.Semaphore(name, permits, lease)
	switch role {
	case "rwhold":
		take := rw.RLock
		if os.Getenv("LOCK_HELPER_KIND") == "w" {
			take = rw.Lock
		}
		l, err := take(ctx)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("locked", l.Fence())
		select {}
	case "rwwait": // queue writers behind the holder, say so, and wait to be killed
		n, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_GOROUTINES"))
		for range n {
			go rw.Lock(ctx)
		}
		for {
			q, err := rc.Do(ctx, rc.B().Zcard().Key(rw.s.keys[2]).Build()).AsInt64()
			if err == nil && q >= int64(n) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		fmt.Println("waiting")
		select {}
	case "semhold":
		if _, err := sem.Acquire(ctx); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("acquired")
		select {}
	case "rwcount", "semcount":
		occ := os.Getenv("LOCK_HELPER_COUNTER") + ":inside"
		body := semBody(rc, sem, occ, int64(permits))
		if role == "rwcount" {
			every, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_WRITE_EVERY"))
			body = rwBody(rc, rw, occ, os.Getenv("LOCK_HELPER_COUNTER"), every)
		}
		json.NewEncoder(os.Stdout).Encode(runSharedWorker(body))
	default:
		fmt.Println("unknown role", role)
		os.Exit(2)
	}
}

// holdBody takes one hold (goroutine g, iteration i) and records what it
// saw in r.
type holdBody func(ctx context.Context, g, i int, r *helperResult) error

// runSharedWorker runs body in LOCK_HELPER_GOROUTINES goroutines,
// LOCK_HELPER_ITERATIONS times each, from LOCK_HELPER_START (unix ns).
func runSharedWorker(body holdBody) helperResult {
	n, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_GOROUTINES"))
	iters, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_ITERATIONS"))
	startNs, _ := strconv.ParseInt(os.Getenv("LOCK_HELPER_START"), 10, 64)
	time.Sleep(time.Until(time.Unix(0, startNs)))
	res := helperResult{Acquisitions: make([]int, n)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range iters {
				var r helperResult
				err := body(context.Background(), g, i, &r)
				mu.Lock()
				if err != nil {
					res.Errors = append(res.Errors, err.Error())
				} else {
					res.Acquisitions[g]++
				}
				res.Reads, res.Fences = append(res.Reads, r.Reads...), append(res.Fences, r.Fences...)
				res.MaxInside, res.Violations = max(res.MaxInside, r.MaxInside), res.Violations+r.Violations
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res
}

// writerWeight is what a writer adds to the occupancy key: more than any
// number of readers the tests run.
const writerWeight = 1000

// rwBody takes the write lock every every-th hold, else a read lock. Each
// hold adds its weight to the occupancy key occ while it holds: a reader
// must see no writer, a writer nobody. A writer also increments counter
// by a read-modify-write that only mutual exclusion keeps exact.
func rwBody(rc rueidis.Client, rw *RWMutex, occ, counter string, every int) holdBody {
	return func(ctx context.Context, g, i int, r *helperResult) error {
		writer := (g*7+i)%every == 0
		take, weight := rw.RLock, int64(1)
		if writer {
			take, weight = rw.Lock, writerWeight
		}
		l, err := take(ctx)
		if err != nil {
			return err
		}
		v, err := rc.Do(ctx, rc.B().Incrby().Key(occ).Increment(weight).Build()).AsInt64()
		if err != nil {
			return err
		}
		if writer && v != writerWeight || !writer && v >= writerWeight {
			r.Violations++
		}
		if !writer {
			r.MaxInside = int(v)
			time.Sleep(time.Millisecond) // let readers overlap
		} else if err := incrementUnderLock(ctx, rc, counter, l.Fence(), r); err != nil {
			return err
		}
		if err := rc.Do(ctx, rc.B().Incrby().Key(occ).Increment(-weight).Build()).Error(); err != nil {
			return err
		}
		return l.Unlock(ctx)
	}
}

// incrementUnderLock increments counter by GET and SET, recording the
// value read and the fence it was read under.
func incrementUnderLock(ctx context.Context, rc rueidis.Client, counter string, fence int64, r *helperResult) error {
	v, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
	if err != nil && !rueidis.IsRedisNil(err) {
		return err
	}
	if err := rc.Do(ctx, rc.B().Set().Key(counter).Value(strconv.FormatInt(v+1, 10)).Build()).Error(); err != nil {
		return err
	}
	r.Reads, r.Fences = append(r.Reads, v), append(r.Fences, fence)
	return nil
}

// semBody holds a permit of sem while counting itself in occ: nobody may
// see more than permits holders.
func semBody(rc rueidis.Client, sem *Semaphore, occ string, permits int64) holdBody {
	return func(ctx context.Context, g, i int, r *helperResult) error {
		p, err := sem.Acquire(ctx)
		if err != nil {
			return err
		}
		v, err := rc.Do(ctx, rc.B().Incr().Key(occ).Build()).AsInt64()
		if err != nil {
			return err
		}
		if v > permits {
			r.Violations++
		}
		r.MaxInside = int(v)
		time.Sleep(time.Millisecond)
		if err := rc.Do(ctx, rc.B().Decr().Key(occ).Build()).Error(); err != nil {
			return err
		}
		return p.Release(ctx)
	}
}

// sumResults adds up the workers' results; reads and fences are sorted by
// the value read.
func sumResults(results []helperResult) (total helperResult) {
	type obs struct{ read, fence int64 }
	var all []obs
	for _, r := range results {
		total.Acquisitions = append(total.Acquisitions, r.Acquisitions...)
		total.MaxInside = max(total.MaxInside, r.MaxInside)
		total.Violations += r.Violations
		for i := range r.Reads {
			all = append(all, obs{r.Reads[i], r.Fences[i]})
		}
	}
	slices.SortFunc(all, func(a, b obs) int { return int(a.read - b.read) })
	for _, o := range all {
		total.Reads, total.Fences = append(total.Reads, o.read), append(total.Fences, o.fence)
	}
	return total
}

func TestRWMutexAcrossProcesses(t *testing.T) {
	_, _, prefix := newTestClient(t)
	checkRWMutex(t, prefix, nil)
}

// TestRWMutexAcrossProcessesOnCluster runs the same processes on a Redis
// Cluster, subscribed on whichever node rueidis picks.
func TestRWMutexAcrossProcessesOnCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	_, prefix := c.PrefixedClient(t)
	checkRWMutex(t, prefix, map[string]string{"REDIS": strings.Join(c.Addrs(), ",")})
}

// checkRWMutex runs 32 goroutines in 3 worker processes that take a
// RWMutex 12 times each, every 6th time as a writer, and checks readers
// shared, nobody saw a conflicting hold, and the writers' non-atomic
// increments and fences are in order. vars go to the workers too.
func checkRWMutex(t *testing.T, prefix string, vars map[string]string) {
	t.Helper()
	const iterations, every = 12, 6
	goroutines := []int{11, 11, 10}
	v := map[string]string{
		"PREFIX": prefix, "NAME": "shared", "ITERATIONS": strconv.Itoa(iterations),
		"COUNTER": prefix + "counter", "WRITE_EVERY": strconv.Itoa(every),
		"START": strconv.FormatInt(time.Now().Add(300*time.Millisecond).UnixNano(), 10),
	}
	maps.Copy(v, vars)
	results := runWorkers(t, "rwcount", goroutines, v)
	sum := sumResults(results)
	if sum.Violations != 0 {
		t.Fatalf("%d holds saw a conflicting hold", sum.Violations)
	}
	if sum.MaxInside < 2 {
		t.Errorf("at most %d reader held at once: readers do not share", sum.MaxInside)
	}
	if slices.Min(sum.Acquisitions) != iterations {
		t.Errorf("acquisitions per goroutine %v, want %d each", sum.Acquisitions, iterations)
	}
	// Under the write lock the counter went 0, 1, 2, …; the writers'
	// fences must increase in the same order.
	for i, v := range sum.Reads {
		if v != int64(i) {
			t.Fatalf("write #%d read counter %d: writers overlapped", i, v)
		}
		if i > 0 && sum.Fences[i] <= sum.Fences[i-1] {
			t.Fatalf("fence %d at counter %d after fence %d", sum.Fences[i], v, sum.Fences[i-1])
		}
	}
	if len(sum.Reads) == 0 {
		t.Fatal("no writes")
	}
	t.Logf("%d writes, up to %d readers at once", len(sum.Reads), sum.MaxInside)
}

func TestSemaphoreAcrossProcesses(t *testing.T) {
	_, _, prefix := newTestClient(t)
	checkSemaphore(t, prefix, nil)
}

// TestSemaphoreAcrossProcessesOnCluster runs the same processes on a Redis
// Cluster.
func TestSemaphoreAcrossProcessesOnCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	_, prefix := c.PrefixedClient(t)
	checkSemaphore(t, prefix, map[string]string{"REDIS": strings.Join(c.Addrs(), ",")})
}

// checkSemaphore runs 64 goroutines in 3 worker processes that take one
// of 8 permits 8 times each, and checks nobody saw more than 8 holders,
// that permits were shared, and every acquisition happened. vars go to the
// workers too.
func checkSemaphore(t *testing.T, prefix string, vars map[string]string) {
	t.Helper()
	const iterations, permits = 8, 8
	v := map[string]string{
		"PREFIX": prefix, "NAME": "shared", "ITERATIONS": strconv.Itoa(iterations),
		"COUNTER": prefix + "counter", "PERMITS": strconv.Itoa(permits),
		"START": strconv.FormatInt(time.Now().Add(300*time.Millisecond).UnixNano(), 10),
	}
	maps.Copy(v, vars)
	results := runWorkers(t, "semcount", []int{22, 21, 21}, v)
	sum := sumResults(results)
	if sum.Violations != 0 || sum.MaxInside > permits {
		t.Fatalf("%d holds saw more than %d holders (most: %d)", sum.Violations, permits, sum.MaxInside)
	}
	if sum.MaxInside < 2 {
		t.Errorf("at most %d holder at once with %d permits", sum.MaxInside, permits)
	}
	if slices.Min(sum.Acquisitions) != iterations {
		t.Errorf("acquisitions per goroutine %v, want %d each", sum.Acquisitions, iterations)
	}
	t.Logf("up to %d of %d permits held at once", sum.MaxInside, permits)
}

// killHolder starts a worker that takes a hold in role with a 1s lease,
// waits for it to say so, SIGKILLs it and returns what it said.
func killHolder(t *testing.T, role string, vars map[string]string) string {
	t.Helper()
	vars["LEASE"] = "1s"
	cmd, out := helper(t, role, vars)
	line := readLine(t, out)
	if strings.HasPrefix(line, "error") {
		t.Fatalf("worker said %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	return line
}

func TestRWMutexKilledWriterFreesLockAfterLease(t *testing.T) {
	c, _, prefix := newTestClient(t)
	line := killHolder(t, "rwhold", map[string]string{"PREFIX": prefix, "NAME": "a", "KIND": "w"})
	fence, err := strconv.ParseInt(strings.TrimPrefix(line, "locked "), 10, 64)
	if err != nil {
		t.Fatalf("worker said %q", line)
	}
	rw := c.RWMutex("a")
	if _, err := rw.TryRLock(context.Background()); err != ErrNotObtained {
		t.Fatalf("TryRLock right after the kill: %v, want ErrNotObtained", err)
	}
	start := time.Now()
	l, err := rw.Lock(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= fence {
		t.Errorf("fence %d after the killed writer's %d", l.Fence(), fence)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("waited %v for a 1s lease", d)
	}
	mustUnlockRW(t, l)
}

func TestRWMutexKilledReaderFreesLockAfterLease(t *testing.T) {
	c, _, prefix := newTestClient(t)
	killHolder(t, "rwhold", map[string]string{"PREFIX": prefix, "NAME": "a", "KIND": "r"})
	rw := c.RWMutex("a")
	r, err := rw.TryRLock(context.Background()) // readers share with the dead one
	if err != nil {
		t.Fatalf("TryRLock beside a killed reader: %v", err)
	}
	mustUnlockRW(t, r)
	if _, err := rw.TryLock(context.Background()); err != ErrNotObtained {
		t.Fatalf("TryLock right after the kill: %v, want ErrNotObtained", err)
	}
	mustUnlockRW(t, mustRWLock(t, rw.Lock, timeout(t, 10*time.Second)))
}

func TestSemaphoreKilledHolderPermitReturnsAfterLease(t *testing.T) {
	c, _, prefix := newTestClient(t)
	killHolder(t, "semhold", map[string]string{"PREFIX": prefix, "NAME": "a", "PERMITS": "1"})
	sem := c.Semaphore("a", 1)
	if _, err := sem.TryAcquire(context.Background()); err != ErrNotObtained {
		t.Fatalf("TryAcquire right after the kill: %v, want ErrNotObtained", err)
	}
	start := time.Now()
	p, err := sem.Acquire(timeout(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("waited %v for a 1s lease", d)
	}
	if err := p.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestRWMutexKilledWaitersAreSkipped queues 8 writers of a process behind
// a holder, and a live writer behind them, then kills the process: the
// dead waiters must cost the live one about their check-in deadline
// (1.5s: five times their fallback maximum) plus a handoff lease, not a
// handoff lease each (8s).
func TestRWMutexKilledWaitersAreSkipped(t *testing.T) {
	const handoff = time.Second
	c, rc, prefix := newTestClient(t, WithHandoffLease(handoff), WithFallback(20*time.Millisecond, 50*time.Millisecond))
	rw := c.RWMutex("a")
	holder := mustRWLock(t, rw.Lock, timeout(t, 5*time.Second))
	cmd, out := helper(t, "rwwait", map[string]string{
		"PREFIX": prefix, "NAME": "a", "GOROUTINES": "8", "HANDOFF": handoff.String(),
	})
	if line := readLine(t, out); line != "waiting" {
		t.Fatalf("worker said %q", line)
	}
	other := sibling(t, prefix).RWMutex("a")
	live := takeAndRelease(timeout(t, 20*time.Second), func(ctx context.Context, _ int64) (func(context.Context) error, error) {
		l, err := other.Lock(ctx)
		if err != nil {
			return nil, err
		}
		return l.Unlock, nil
	})
	waitSharedQueued(t, rc, &rw.s, 9)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	start := time.Now()
	mustUnlockRW(t, holder) // grants the first dead waiter
	if err := <-live; err != nil {
		t.Fatalf("live waiter behind a killed process: %v", err)
	}
	d := time.Since(start)
	if d > 4500*time.Millisecond {
		t.Errorf("live waiter waited %v behind 8 dead ones", d)
	}
	t.Logf("live waiter waited %v behind 8 dead ones", d)
	if n := sharedQueued(t, rc, &rw.s); n != 0 {
		t.Errorf("%d entries left in the queue", n)
	}
}

// takeAndRelease runs take (see runContended) with ctx in the background
// and releases what it took; the channel gets the outcome.
func takeAndRelease(ctx context.Context, take func(context.Context, int64) (func(context.Context) error, error)) <-chan error {
	done := make(chan error, 1)
	go func() {
		release, err := take(ctx, 0)
		if err == nil {
			err = release(context.Background())
		}
		done <- err
	}()
	return done
}
