package lock

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }

// The multi-process tests re-execute the test binary as workers: each runs
// TestHelperProcess with LOCK_HELPER set to its role and its parameters in
// LOCK_HELPER_* variables, and reports on stdout.
const helperEnv = "LOCK_HELPER"

// helperResult is what a "count" or "contend" worker reports.
type helperResult struct {
	Acquisitions []int      `json:"acquisitions"` // per goroutine
	Waits        []int64    `json:"waits"`        // ns, every Lock call
	Reads        []int64    `json:"reads"`        // counter value read under the lock
	Fences       []int64    `json:"fences"`       // fence of the same acquisition
	Holds        [][2]int64 `json:"holds"`        // [acquired, releasing] unix ns ("contend")
	Local        int        `json:"local"`        // acquisitions handed over within the process
	MaxInside    int        `json:"max_inside"`   // most holders seen at once (RWMutex readers, Semaphore)
	Violations   int        `json:"violations"`   // holds that saw a conflicting hold
	Errors       []string
}

// TestHelperProcess is not a test: it is the worker of the multi-process
// tests, and returns at once when run normally.
func TestHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		return
	}
	opt := testenv.RedisOption()
	if addrs := os.Getenv("LOCK_HELPER_REDIS"); addrs != "" {
		opt.InitAddress = strings.Split(addrs, ",") // a cluster's nodes
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	c := New(rc, WithPrefix(os.Getenv("LOCK_HELPER_PREFIX")),
		WithHandoffLease(envDuration("LOCK_HELPER_HANDOFF", 2*time.Second)))
	m := c.Mutex(os.Getenv("LOCK_HELPER_NAME"), WithWatchdog(envDuration("LOCK_HELPER_LEASE", 10*time.Second)))
	ctx := context.Background()
	switch role {
	case "hold": // take the lock, say so, and wait to be killed
		l, err := m.Lock(ctx)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("locked", l.Fence())
		select {}
	case "wait": // queue behind the holder with many goroutines, say so, and wait to be killed
		n, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_GOROUTINES"))
		for range n {
			go m.Lock(ctx)
		}
		for c.queuedLocally(m) < n {
			time.Sleep(time.Millisecond)
		}
		fmt.Println("waiting")
		select {}
	case "count", "contend":
		if f := os.Getenv("LOCK_HELPER_CPUPROFILE"); f != "" {
			out, _ := os.Create(f + "." + strconv.Itoa(os.Getpid()))
			pprof.StartCPUProfile(out)
			defer pprof.StopCPUProfile()
		}
		res := runWorker(ctx, rc, m, role)
		json.NewEncoder(os.Stdout).Encode(res)
		c.Close()
		rc.Close()
	default: // the RWMutex and Semaphore roles (shared_process_test.go)
		sharedHelper(ctx, rc, c, role)
	}
}

// runWorker runs LOCK_HELPER_GOROUTINES goroutines that take the lock in a
// loop: "count" does LOCK_HELPER_ITERATIONS non-atomic increments of the
// counter key each; "contend" takes it as often as it can from
// LOCK_HELPER_START (unix ns) for LOCK_HELPER_DURATION.
func runWorker(ctx context.Context, rc rueidis.Client, m *Mutex, role string) helperResult {
	n, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_GOROUTINES"))
	iters, _ := strconv.Atoi(os.Getenv("LOCK_HELPER_ITERATIONS"))
	counter := os.Getenv("LOCK_HELPER_COUNTER")
	startNs, _ := strconv.ParseInt(os.Getenv("LOCK_HELPER_START"), 10, 64)
	start := time.Unix(0, startNs)
	end := start.Add(envDuration("LOCK_HELPER_DURATION", time.Second))
	time.Sleep(time.Until(start))

	res := helperResult{Acquisitions: make([]int, n)}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var waits, reads, fences []int64
			var holds [][2]int64
			fail := func(err error) {
				mu.Lock()
				res.Errors = append(res.Errors, err.Error())
				mu.Unlock()
			}
			for i := 0; role == "count" && i < iters || role == "contend" && time.Now().Before(end); i++ {
				t0 := time.Now()
				l, err := m.Lock(ctx)
				if err != nil {
					fail(err)
					return
				}
				acquired := time.Now()
				waits = append(waits, int64(acquired.Sub(t0)))
				if handedLocally(l) {
					mu.Lock()
					res.Local++
					mu.Unlock()
				}
				if role == "count" {
					// A read-modify-write that only mutual exclusion keeps exact.
					v, err := rc.Do(ctx, rc.B().Get().Key(counter).Build()).AsInt64()
					if err != nil && !rueidis.IsRedisNil(err) {
						fail(err)
					}
					runtime.Gosched()
					if err := rc.Do(ctx, rc.B().Set().Key(counter).Value(strconv.FormatInt(v+1, 10)).Build()).Error(); err != nil {
						fail(err)
					}
					reads, fences = append(reads, v), append(fences, l.Fence())
				}
				if role == "contend" {
					holds = append(holds, [2]int64{acquired.UnixNano(), time.Now().UnixNano()})
				}
				if err := l.Unlock(ctx); err != nil {
					fail(err)
					return
				}
				res.Acquisitions[g]++
			}
			mu.Lock()
			res.Waits = append(res.Waits, waits...)
			res.Reads = append(res.Reads, reads...)
			res.Fences = append(res.Fences, fences...)
			res.Holds = append(res.Holds, holds...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return res
}

func envDuration(key string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(key)); err == nil {
		return d
	}
	return def
}

// handedLocally reports whether l was handed over within its Client's
// turn, rather than granted by Redis under its own token.
func handedLocally(l *Lock) bool { return l.t.token != l.token }

// queuedLocally returns how many of c's waiters wait for m.
func (c *Client) queuedLocally(m *Mutex) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ln := c.lines[m.keyList[0]]
	if ln == nil {
		return 0
	}
	n := len(ln.queue)
	if ln.rep != nil {
		n++
	}
	return n
}

// helper starts a worker process with the given role and variables
// (LOCK_HELPER_ is prepended to their names). The process is killed at
// cleanup if still running.
func helper(t testing.TB, role string, vars map[string]string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	test := "TestHelperProcess"
	if strings.HasPrefix(role, "multi") { // see TestMultiHelperProcess
		test = "TestMultiHelperProcess"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.v=false")
	cmd.Env = append(os.Environ(), helperEnv+"="+role)
	for k, v := range vars {
		cmd.Env = append(cmd.Env, "LOCK_HELPER_"+k+"="+v)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, bufio.NewReader(out)
}

// readLine reads the next line a worker printed, failing the test on EOF.
func readLine(t testing.TB, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("worker output: %q, %v", line, err)
	}
	return strings.TrimSpace(line)
}

// workerCPU is the CPU time the workers of the last runWorkers used.
var workerCPU time.Duration

// runWorkers runs one worker per entry of goroutines (its goroutine count)
// with the shared variables and returns their results.
func runWorkers(t testing.TB, role string, goroutines []int, vars map[string]string) []helperResult {
	t.Helper()
	results := make([]helperResult, len(goroutines))
	var cpu atomic.Int64
	defer func() { workerCPU = time.Duration(cpu.Load()) }()
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i, n := range goroutines {
		v := map[string]string{"GOROUTINES": strconv.Itoa(n)}
		for k, x := range vars {
			v[k] = x
		}
		cmd, out := helper(t, role, v)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := io.ReadAll(out)
			werr := cmd.Wait()
			if cmd.ProcessState != nil {
				cpu.Add(int64(cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()))
			}
			if werr != nil || err != nil {
				t.Errorf("worker %d: %v %v: %s", i, werr, err, b)
				failed.Store(true)
				return
			}
			// The test binary may print PASS after the result.
			line, _, _ := strings.Cut(string(b), "\n")
			if err := json.Unmarshal([]byte(line), &results[i]); err != nil {
				t.Errorf("worker %d output %q: %v", i, b, err)
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	if failed.Load() {
		t.FailNow()
	}
	for i, r := range results {
		for _, e := range r.Errors {
			t.Errorf("worker %d: %s", i, e)
		}
	}
	return results
}

func TestMutualExclusionAcrossProcesses(t *testing.T) {
	_, rc, prefix := newTestClient(t)
	checkMutualExclusion(t, rc, prefix, nil)
}

// TestMutualExclusionAcrossProcessesOnCluster runs the same three processes
// on a Redis Cluster: the lock's keys live on the master of its name's
// slot, and its grants are pushed to processes subscribed on other nodes.
func TestMutualExclusionAcrossProcessesOnCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	rc, prefix := c.PrefixedClient(t)
	checkMutualExclusion(t, rc, prefix, map[string]string{"REDIS": strings.Join(c.Addrs(), ",")})
}

// checkMutualExclusion runs 64 goroutines in 3 worker processes that each
// increment a counter 15 times under one lock with a non-atomic
// read-modify-write, and checks no increment was lost and the fences
// increase in the counter's order. vars go to the workers too.
func checkMutualExclusion(t *testing.T, rc rueidis.Client, prefix string, vars map[string]string) {
	t.Helper()
	const iterations = 15
	goroutines := []int{22, 21, 21}
	counter := prefix + "counter"
	v := map[string]string{
		"PREFIX":     prefix,
		"NAME":       "shared",
		"ITERATIONS": strconv.Itoa(iterations),
		"COUNTER":    counter,
		"START":      strconv.FormatInt(time.Now().Add(300*time.Millisecond).UnixNano(), 10),
	}
	maps.Copy(v, vars)
	results := runWorkers(t, "count", goroutines, v)
	total := 64 * iterations
	got, err := rc.Do(context.Background(), rc.B().Get().Key(counter).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if got != int64(total) {
		t.Fatalf("counter = %d after %d locked increments: mutual exclusion violated", got, total)
	}
	// Under the lock the counter went 0, 1, 2, …, and the fences of those
	// acquisitions must increase in the same order.
	type obs struct{ read, fence int64 }
	var all []obs
	local := 0
	for _, r := range results {
		local += r.Local
		for i := range r.Reads {
			all = append(all, obs{r.Reads[i], r.Fences[i]})
		}
	}
	if local == 0 {
		t.Error("no acquisition was handed over within a process")
	}
	slices.SortFunc(all, func(a, b obs) int { return int(a.read - b.read) })
	for i, o := range all {
		if o.read != int64(i) {
			t.Fatalf("read #%d saw counter %d", i, o.read)
		}
		if i > 0 && o.fence <= all[i-1].fence {
			t.Fatalf("fence %d at counter %d after fence %d: not increasing", o.fence, o.read, all[i-1].fence)
		}
	}
}

func TestKilledHolderFreesLockAfterLease(t *testing.T) {
	c, _, prefix := newTestClient(t)
	cmd, out := helper(t, "hold", map[string]string{"PREFIX": prefix, "NAME": "a", "LEASE": "1s"})
	line := readLine(t, out)
	fence, err := strconv.ParseInt(strings.TrimPrefix(line, "locked "), 10, 64)
	if err != nil {
		t.Fatalf("worker said %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	m := c.Mutex("a")
	wantNotObtained(t, m) // the lease (1s, renewed every 333ms) outlives the kill for a while
	l := mustLock(t, timeout(t, 10*time.Second), m)
	if l.Fence() <= fence {
		t.Errorf("fence %d after the killed holder's %d", l.Fence(), fence)
	}
	mustUnlock(t, l)
}

func TestKilledWaitersAreSkipped(t *testing.T) {
	const handoff = 500 * time.Millisecond
	c, rc, prefix := newTestClient(t, WithHandoffLease(handoff), WithFallback(20*time.Millisecond, 50*time.Millisecond))
	m := c.Mutex("a")
	holder := mustLock(t, timeout(t, 5*time.Second), m)
	cmd, out := helper(t, "wait", map[string]string{
		"PREFIX": prefix, "NAME": "a", "GOROUTINES": "8",
		"HANDOFF": handoff.String(), "LEASE": "10s",
	})
	if line := readLine(t, out); line != "waiting" {
		t.Fatalf("worker said %q", line)
	}
	// Queue behind the doomed process, then kill it.
	live := takeAndRelease(timeout(t, 20*time.Second), lockMutex(sibling(t, prefix).Mutex("a")))
	for queued(t, rc, m) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	mustUnlock(t, holder) // hands the lock to the dead process first

	if err := <-live; err != nil {
		t.Fatalf("live waiter behind a killed process: %v", err)
	}
	if q := queued(t, rc, m); q != 0 {
		t.Errorf("queue has %d entries after the live waiter left", q)
	}
}

// contention is what a contended run across processes measured.
type contention struct {
	acquisitions int
	perSecond    float64
	p50, p99     time.Duration // wait in Lock
	jain         float64       // Jain's fairness index over per-goroutine counts
	counts       []int
	violations   int // overlapping hold intervals
	local        int // acquisitions handed over within a process
	redisCPU     time.Duration
	workerCPU    time.Duration // per acquisition
}

// contend has goroutines[i] goroutines in worker process i take one lock in
// a loop for d, and aggregates what they report.
func contend(tb testing.TB, goroutines []int, d time.Duration) contention {
	_, rc, prefix := newTestClient(tb)
	cpu0 := redisCPUTime(tb, rc)
	results := runWorkers(tb, "contend", goroutines, map[string]string{
		"PREFIX":   prefix,
		"NAME":     "hot",
		"START":    strconv.FormatInt(time.Now().Add(time.Second).UnixNano(), 10),
		"DURATION": d.String(),
	})
	redisCPU := redisCPUTime(tb, rc) - cpu0
	var c contention
	var waits []time.Duration
	var holds [][2]int64
	for _, r := range results {
		c.counts = append(c.counts, r.Acquisitions...)
		for _, w := range r.Waits {
			waits = append(waits, time.Duration(w))
		}
		holds = append(holds, r.Holds...)
		c.local += r.Local
	}
	slices.Sort(waits)
	var sum, sumSq float64
	for _, n := range c.counts {
		sum += float64(n)
		sumSq += float64(n) * float64(n)
	}
	if sum == 0 {
		tb.Fatal("no acquisitions")
	}
	c.acquisitions = int(sum)
	c.perSecond = sum / d.Seconds()
	c.p50, c.p99 = waits[len(waits)/2], waits[len(waits)*99/100]
	c.jain = sum * sum / (float64(len(c.counts)) * sumSq)
	c.violations = overlaps(holds)
	c.redisCPU = redisCPU / time.Duration(sum)
	c.workerCPU = workerCPU / time.Duration(sum)
	return c
}

// overlaps counts hold intervals that start before an earlier one ended:
// each is recorded inside a true holding period, so with a correct lock
// none do (all processes share the machine's clock).
func overlaps(holds [][2]int64) int {
	slices.SortFunc(holds, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	n := 0
	var end int64
	for i, h := range holds {
		if i > 0 && h[0] < end {
			n++
		}
		end = max(end, h[1])
	}
	return n
}

// TestContendedAcrossProcesses is the worst case the lock is built for: 64
// goroutines in 3 processes on one key. Every goroutine must get its share, and no two may
// hold the lock at once.
func TestContendedAcrossProcesses(t *testing.T) {
	c := contend(t, []int{22, 21, 21}, envDuration("LOCK_CONTENDED_DURATION", 2*time.Second))
	t.Logf("%d acquisitions (%.0f/s, %d handed over locally), p50 wait %v, p99 %v, Jain %.4f; CPU per acquisition: Redis %v, workers %v",
		c.acquisitions, c.perSecond, c.local, c.p50, c.p99, c.jain, c.redisCPU, c.workerCPU)
	if c.violations != 0 {
		t.Errorf("%d overlapping holds", c.violations)
	}
	if slices.Min(c.counts) == 0 || c.jain < 0.95 {
		t.Errorf("Jain's fairness index %.3f: counts %v", c.jain, c.counts)
	}
}

// redisCPUTime returns the CPU time the Redis server has used (all clients).
func redisCPUTime(t testing.TB, rc rueidis.Client) time.Duration {
	t.Helper()
	s, err := rc.Do(context.Background(), rc.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if k == "used_cpu_user" || k == "used_cpu_sys" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

func TestOverlapsCountsConcurrentHolds(t *testing.T) {
	tests := []struct {
		holds [][2]int64
		want  int
	}{
		{[][2]int64{{0, 10}, {10, 20}, {20, 30}}, 0},
		{[][2]int64{{20, 30}, {0, 10}, {15, 25}}, 1},
		{[][2]int64{{0, 100}, {10, 20}, {30, 40}}, 2},
	}
	for _, tt := range tests {
		if got := overlaps(tt.holds); got != tt.want {
			t.Errorf("overlaps(%v) = %d, want %d", tt.holds, got, tt.want)
		}
	}
}
