package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// testCall is one call: n its number, answer set by run, took set by Take.
type testCall struct {
	Call
	n      int
	took   bool
	answer int
}

// recorder is a queue's run: it blocks each batch until released (when
// gated), records the batches and answers each call n*10.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	started chan int // the batch's first call, as it starts
	release chan struct{}
}

func newRecorder() *recorder {
	return &recorder{started: make(chan int, 100), release: make(chan struct{}, 100)}
}

func (r *recorder) run(t *testing.T) func([]*testCall) {
	return func(batch []*testCall) {
		r.started <- batch[0].n
		<-r.release
		var ns []int
		for _, c := range batch {
			if !c.took {
				t.Errorf("call %d run without Take", c.n)
			}
			c.answer = c.n * 10
			ns = append(ns, c.n)
		}
		r.mu.Lock()
		r.batches = append(r.batches, ns)
		r.mu.Unlock()
	}
}

func (r *recorder) got() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches)
}

func open(t *testing.T, r *recorder, admit func(*testCall, int) error) func() *Queue[*testCall] {
	return func() *Queue[*testCall] {
		return New(Config[*testCall]{Workers: 1, Max: 4, Admit: admit, Take: func(c *testCall) { c.took = true }, Run: r.run(t)})
	}
}

// do runs call n on m's key "k" in a goroutine and returns its outcome.
func do(ctx context.Context, m *Map[string, *testCall], o func() *Queue[*testCall], n int) (*testCall, chan error) {
	c, errc := &testCall{n: n}, make(chan error, 1)
	go func() { errc <- m.Do(ctx, "k", c, o) }()
	return c, errc
}

// waitQueued waits until key k's queue holds n calls.
func waitQueued(t *testing.T, m *Map[string, *testCall], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if v, ok := m.queues.Load("k"); ok {
			q := v.(*Queue[*testCall])
			q.mu.Lock()
			l := len(q.calls)
			q.mu.Unlock()
			if l == n {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the queue never held %d calls", n)
}

// waitGone waits until key k has no queue.
func waitGone(t *testing.T, m *Map[string, *testCall]) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for m.Has("k") {
		if time.Now().After(deadline) {
			t.Fatal("the queue stayed in the map once empty")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBatchesInArrivalOrder: a lone call goes alone, at once; what queues
// while it runs goes next in arrival order, Max at a time; every caller
// gets its own answer; the queue leaves the map once empty.
func TestBatchesInArrivalOrder(t *testing.T) {
	var m Map[string, *testCall]
	r := newRecorder()
	o := open(t, r, nil)
	first, firstErr := do(context.Background(), &m, o, 0)
	if n := <-r.started; n != 0 {
		t.Fatalf("first batch starts with %d", n)
	}
	calls := []*testCall{first}
	errs := []chan error{firstErr}
	for n := 1; n <= 9; n++ {
		c, e := do(context.Background(), &m, o, n)
		calls, errs = append(calls, c), append(errs, e)
		waitQueued(t, &m, n) // one at a time: arrival order is n
	}
	for range 4 {
		r.release <- struct{}{}
	}
	for i, e := range errs {
		if err := <-e; err != nil || calls[i].answer != i*10 {
			t.Fatalf("call %d: %v, answer %d", i, err, calls[i].answer)
		}
	}
	want := [][]int{{0}, {1, 2, 3, 4}, {5, 6, 7, 8}, {9}}
	if got := r.got(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	waitGone(t, &m)
}

// TestCtxEndsBeforeTake: a queued call whose ctx ends returns ctx's error
// at once, while the batch ahead still runs, and is never sent.
func TestCtxEndsBeforeTake(t *testing.T) {
	var m Map[string, *testCall]
	r := newRecorder()
	o := open(t, r, nil)
	_, firstErr := do(context.Background(), &m, o, 0)
	<-r.started
	ctx, cancel := context.WithCancel(context.Background())
	_, leftErr := do(ctx, &m, o, 1)
	waitQueued(t, &m, 1)
	_, stayErr := do(context.Background(), &m, o, 2)
	waitQueued(t, &m, 2)
	cancel()
	select {
	case err := <-leftErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("queued call whose ctx ended: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("queued call whose ctx ended still waits")
	}
	r.release <- struct{}{}
	r.release <- struct{}{}
	if err := <-firstErr; err != nil {
		t.Fatal(err)
	}
	if err := <-stayErr; err != nil {
		t.Fatal(err)
	}
	if got, want := r.got(), [][]int{{0}, {2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v (call 1 never sent)", got, want)
	}
	waitGone(t, &m)
}

// TestCtxEndsAfterTake: a call a batch has taken waits for that batch's
// answer although its ctx ended, and gets it.
func TestCtxEndsAfterTake(t *testing.T) {
	var m Map[string, *testCall]
	r := newRecorder()
	o := open(t, r, nil)
	ctx, cancel := context.WithCancel(context.Background())
	c, errc := do(ctx, &m, o, 7)
	<-r.started
	cancel()
	select {
	case err := <-errc:
		t.Fatalf("a taken call returned %v before its batch answered", err)
	case <-time.After(100 * time.Millisecond):
	}
	r.release <- struct{}{}
	if err := <-errc; err != nil || c.answer != 70 {
		t.Fatalf("taken call whose ctx ended: %v, answer %d; want its batch's answer 70", err, c.answer)
	}
	waitGone(t, &m)
}

// TestAdmitRefuses: Admit sees how many calls are queued ahead, and a
// call it refuses returns its error at once and is never run.
func TestAdmitRefuses(t *testing.T) {
	var m Map[string, *testCall]
	r := newRecorder()
	errFull := errors.New("full")
	o := open(t, r, func(c *testCall, queued int) error {
		if queued >= 2 {
			return errFull
		}
		return nil
	})
	_, e0 := do(context.Background(), &m, o, 0)
	<-r.started
	_, e1 := do(context.Background(), &m, o, 1)
	waitQueued(t, &m, 1)
	_, e2 := do(context.Background(), &m, o, 2)
	waitQueued(t, &m, 2)
	if err := m.Do(context.Background(), "k", &testCall{n: 3}, o); err != errFull {
		t.Fatalf("third queued call: %v, want the refusal", err)
	}
	r.release <- struct{}{}
	r.release <- struct{}{}
	for _, e := range []chan error{e0, e1, e2} {
		if err := <-e; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.got(), [][]int{{0}, {1, 2}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	waitGone(t, &m)
}

// TestCallerAfterWorkerLeft: a caller that found the queue in the map just
// before its worker left and removed it (here: calling the removed queue)
// is still served, by a worker of its own.
func TestCallerAfterWorkerLeft(t *testing.T) {
	var m Map[string, *testCall]
	r := newRecorder()
	var q *Queue[*testCall]
	o := func() *Queue[*testCall] {
		q = open(t, r, nil)()
		return q
	}
	r.release <- struct{}{}
	r.release <- struct{}{}
	if err := m.Do(context.Background(), "k", &testCall{n: 0}, o); err != nil {
		t.Fatal(err)
	}
	waitGone(t, &m)
	late := &testCall{n: 1}
	if err := q.do(context.Background(), late); err != nil || late.answer != 10 {
		t.Fatalf("late caller: %v, answer %d", err, late.answer)
	}
	if got, want := r.got(), [][]int{{0}, {1}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
}

// TestConcurrentCallers: many callers on a few keys with several workers
// each, some leaving early: each call is answered or dropped, never both,
// a call is run at most once, and no queue stays behind.
func TestConcurrentCallers(t *testing.T) {
	var m Map[int, *testCall]
	var mu sync.Mutex
	runs := map[int]int{}
	o := func() *Queue[*testCall] {
		return New(Config[*testCall]{Workers: 3, Max: 8, Run: func(batch []*testCall) {
			time.Sleep(100 * time.Microsecond)
			mu.Lock()
			defer mu.Unlock()
			for _, c := range batch {
				runs[c.n]++
				c.answer = c.n
			}
		}})
	}
	var wg sync.WaitGroup
	var answered, dropped sync.Map
	for n := 1; n <= 2000; n++ {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n%7)*100*time.Microsecond)
			defer cancel()
			c := &testCall{n: n}
			if err := m.Do(ctx, n%3, c, o); err == nil && c.answer == n {
				answered.Store(n, true)
			} else if errors.Is(err, context.DeadlineExceeded) {
				dropped.Store(n, true)
			} else {
				t.Errorf("call %d: %v, answer %d", n, err, c.answer)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for n := 1; n <= 2000; n++ {
		_, a := answered.Load(n)
		_, d := dropped.Load(n)
		if a == d || runs[n] > 1 || (a && runs[n] != 1) || (d && runs[n] != 0) {
			t.Fatalf("call %d: answered %v, dropped %v, run %d times", n, a, d, runs[n])
		}
	}
	for k := range 3 {
		deadline := time.Now().Add(5 * time.Second)
		for m.Has(k) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if m.Has(k) {
			t.Fatalf("key %d's queue stayed", k)
		}
	}
}

// lingering opens a queue of r that lingers up to linger for one call
// more than were queued as a batch ended.
func lingering(t *testing.T, r *recorder, linger time.Duration) func() *Queue[*testCall] {
	return func() *Queue[*testCall] {
		return New(Config[*testCall]{Workers: 1, Max: 4, Linger: linger, Fill: func(n int) int { return n + 1 },
			Take: func(c *testCall) { c.took = true }, Run: r.run(t)})
	}
}

// TestLingerWaitsForFill: with a Linger, a lone call still goes at once,
// alone; after a batch, the calls queued meanwhile wait for more, and go
// together once Fill's count is queued (3 for 2 queued), within Linger.
func TestLingerWaitsForFill(t *testing.T) {
	var m Map[string, *testCall]
	r := newRecorder()
	o := lingering(t, r, time.Hour) // only Fill ends this linger
	_, firstErr := do(context.Background(), &m, o, 0)
	if n := <-r.started; n != 0 {
		t.Fatalf("first batch starts with %d", n)
	}
	var errs []chan error
	for n := 1; n <= 2; n++ {
		_, e := do(context.Background(), &m, o, n)
		errs = append(errs, e)
		waitQueued(t, &m, n)
	}
	r.release <- struct{}{}
	if err := <-firstErr; err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-r.started:
		t.Fatalf("batch of %d started with 2 calls queued, below Fill 3", n)
	case <-time.After(100 * time.Millisecond):
	}
	_, e := do(context.Background(), &m, o, 3)
	errs = append(errs, e)
	if n := <-r.started; n != 1 {
		t.Fatalf("second batch starts with %d", n)
	}
	r.release <- struct{}{}
	for _, e := range errs {
		if err := <-e; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := r.got(), [][]int{{0}, {1, 2, 3}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	waitGone(t, &m)
}

// TestLingerEnds: a linger that Fill does not end ends by its bound, and
// the calls queued go then.
func TestLingerEnds(t *testing.T) {
	var m Map[string, *testCall]
	r := newRecorder()
	o := lingering(t, r, 10*time.Millisecond)
	_, firstErr := do(context.Background(), &m, o, 0)
	<-r.started
	c, e := do(context.Background(), &m, o, 1)
	waitQueued(t, &m, 1)
	r.release <- struct{}{}
	r.release <- struct{}{}
	if err := <-firstErr; err != nil {
		t.Fatal(err)
	}
	if err := <-e; err != nil || c.answer != 10 {
		t.Fatalf("lingered call: %v, answer %d", err, c.answer)
	}
	if got, want := r.got(), [][]int{{0}, {1}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	waitGone(t, &m)
}

// TestLingerSparesTheNextCall: a call made once the call before it is
// answered, with nothing queued as that batch ended, goes at once, even
// when it is queued before the worker that ran the batch takes the next:
// it was not queued during the batch, so no linger holds it (an hour
// here). The worker used to count the calls queued by then, and lingered.
func TestLingerSparesTheNextCall(t *testing.T) {
	var m Map[string, *testCall]
	r := newRecorder()
	o := lingering(t, r, time.Hour)
	next := make(chan chan error, 1)
	testHookAnswered = func() {
		testHookAnswered = nil // the next batch's worker goes on
		_, e := do(context.Background(), &m, o, 1)
		waitQueued(t, &m, 1)
		next <- e
	}
	t.Cleanup(func() { testHookAnswered = nil })
	r.release <- struct{}{}
	r.release <- struct{}{}
	if _, first := do(context.Background(), &m, o, 0); <-first != nil {
		t.Fatal("the first call failed")
	}
	e := <-next
	select {
	case err := <-e:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call made on hearing back waits for a linger")
	}
	if got, want := r.got(), [][]int{{0}, {1}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	waitGone(t, &m)
}
