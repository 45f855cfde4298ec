package idgen

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

func TestNextIDIncreasesAcrossRanges(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	g := newGen(t, c, prefix, "order", WithBatch(10))

	ids := take(t, g, 1000)

	checkIncreasing(t, "one goroutine", ids)
	if got := g.Stats().IDs; got != 1000 {
		t.Errorf("Stats().IDs = %d, want 1000", got)
	}
}

func TestNextIDConcurrentGoroutines(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	g := newGen(t, c, prefix, "order", WithBatch(100))

	const goroutines, each = 16, 3000
	lists := make([][]int64, goroutines)
	var wg sync.WaitGroup
	for i := range lists {
		wg.Go(func() { lists[i] = take(t, g, each) })
	}
	wg.Wait()

	for i, ids := range lists {
		checkIncreasing(t, fmt.Sprintf("goroutine %d", i), ids)
	}
	if n := checkUnique(t, lists...); n != goroutines*each {
		t.Errorf("%d unique ids, want %d", n, goroutines*each)
	}
}

func TestGeneratorsSharingANameNeverCollide(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	const instances, goroutines, each = 4, 4, 1500
	var lists [][]int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range instances {
		// Each simulated instance has its own client and a different batch,
		// so their ranges interleave unevenly.
		g := newGen(t, newClient(t), prefix, "order", WithBatch(int64(7+31*i)))
		for range goroutines {
			wg.Go(func() {
				ids := take(t, g, each)
				checkIncreasing(t, "instance goroutine", ids)
				mu.Lock()
				lists = append(lists, ids)
				mu.Unlock()
			})
		}
	}
	wg.Wait()

	if n := checkUnique(t, lists...); n != instances*goroutines*each {
		t.Errorf("%d unique ids, want %d", n, instances*goroutines*each)
	}
}

func TestOneRoundTripPerBatch(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	g := newGen(t, c, prefix, "order", WithBatch(1000))

	// The first call creates the hash, which takes an extra round trip.
	take(t, g, 1)
	settle(g)
	start := g.Stats().RoundTrips

	const n = 100_000
	take(t, g, n)
	settle(g)

	// One range per 1000 ids, give or take the one fetched ahead.
	if got := g.Stats().RoundTrips - start; got < n/1000-1 || got > n/1000+1 {
		t.Errorf("%d round trips for %d ids with batch 1000, want %d±1", got, n, n/1000)
	}
}

func TestSteadyStateNeverWaitsForRedis(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	g := newGen(t, c, prefix, "order", WithBatch(100))

	// A caller slower than Redis: between bursts of 40 ids (less than the
	// 50 left when a refill starts), the refill has time to land.
	for range 100 {
		take(t, g, 40)
		settle(g)
	}

	st := g.Stats()
	if st.Waits != 1 {
		t.Errorf("%d NextID calls waited for Redis, want only the first", st.Waits)
	}
	if st.IDs != 4000 {
		t.Errorf("Stats().IDs = %d, want 4000", st.IDs)
	}
}

func TestKeyLostMidStream(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)

	// The "system of record": the largest id any instance handed out.
	var (
		mu         sync.Mutex
		recorded   int64
		floorCalls int
		floorsSeen []int64
	)
	floor := func(ctx context.Context) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		floorCalls++
		floorsSeen = append(floorsSeen, recorded)
		return recorded, nil
	}
	record := func(ids []int64) {
		mu.Lock()
		recorded = max(recorded, slices.Max(ids))
		mu.Unlock()
	}

	const instances = 3
	gens := make([]*Generator, instances)
	before := make([][]int64, instances)
	for i := range gens {
		gens[i] = newGen(t, newClient(t), prefix, "order", WithBatch(100), WithFloor(floor))
		before[i] = take(t, gens[i], 70) // past half: a range is fetched ahead
		record(before[i])
	}
	// Every instance now holds unused ids in its current and next range.
	var allocatedBefore int64
	for _, g := range gens {
		settle(g)
		g.mu.Lock()
		if g.next.len() == 0 {
			t.Fatalf("no range fetched ahead: cur=%v next=%v", g.cur, g.next)
		}
		allocatedBefore = max(allocatedBefore, g.next.hi-1)
		g.mu.Unlock()
	}

	var resetsBefore uint64
	for _, g := range gens {
		resetsBefore += g.Stats().Resets
	}
	if err := c.Do(context.Background(), c.B().Del().Key(prefix+"{order}").Build()).Error(); err != nil {
		t.Fatal(err)
	}

	after := make([][]int64, instances)
	var wg sync.WaitGroup
	for i, g := range gens {
		wg.Go(func() {
			after[i] = take(t, g, 400) // through the old ranges into new ones
			record(after[i])
		})
	}
	wg.Wait()

	checkUnique(t, append(before, after...)...)
	for i := range gens {
		checkIncreasing(t, fmt.Sprintf("instance %d", i), append(before[i], after[i]...))
	}
	var resets uint64
	for _, g := range gens {
		resets += g.Stats().Resets
	}
	if resets-resetsBefore != 1 {
		t.Errorf("%d resets seen after the loss, want 1", resets-resetsBefore)
	}
	mu.Lock()
	defer mu.Unlock()
	if floorCalls == 0 {
		t.Fatal("the floor function was not consulted")
	}
	maxFloor := slices.Max(floorsSeen)
	var newIDs int
	for _, ids := range after {
		for _, id := range ids {
			if id <= allocatedBefore {
				continue // from a range allocated before the loss
			}
			newIDs++
			if id <= maxFloor || id>>seqBits <= allocatedBefore>>seqBits {
				t.Fatalf("id %d after the loss is not in a later second than the floor %d and the ranges before %d", id, maxFloor, allocatedBefore)
			}
		}
	}
	if newIDs == 0 {
		t.Fatal("no id came from a range allocated after the loss")
	}
}

func TestFloorAheadOfTheClock(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	// The system of record holds an id a second ahead of Redis's clock (a
	// clock that went back): the restarted hash must go past it.
	now, err := redisSecond(c)
	if err != nil {
		t.Fatal(err)
	}
	floorID := compose(now+1, 5)
	g := newGen(t, c, prefix, "order", WithFloor(func(ctx context.Context) (int64, error) { return floorID, nil }))

	ids := take(t, g, 10)

	if ids[0] <= floorID {
		t.Errorf("first id %d is not above the floor %d", ids[0], floorID)
	}
	if st := g.Stats(); st.Resets != 1 {
		t.Errorf("Stats().Resets = %d, want 1", st.Resets)
	}
}

func TestKeyLostAgainRightAfterARestart(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	del := func() {
		t.Helper()
		if err := c.Do(context.Background(), c.B().Del().Key(prefix+"{order}").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// An idle instance: it holds an old range and its own floor is old.
	idle := newGen(t, newClient(t), prefix, "order", WithBatch(20))
	idleIDs := take(t, idle, 1)

	// The hash is lost; a busy instance restarts it and takes a range.
	del()
	busy := newGen(t, newClient(t), prefix, "order", WithBatch(20))
	busyIDs := take(t, busy, 5)

	// The hash is lost again at once, and the idle instance, whose floor
	// is older than the busy one's range, is the one to restart it. Had
	// the busy instance's range been allocated ahead of the clock (in the
	// second after the restart, before the clock got there), the idle one
	// would restart into that same second and take the same ids.
	del()
	idleIDs = append(idleIDs, take(t, idle, 60)...)
	busyIDs = append(busyIDs, take(t, busy, 60)...)

	checkUnique(t, idleIDs, busyIDs)
	checkIncreasing(t, "idle", idleIDs)
	checkIncreasing(t, "busy", busyIDs)
	if r := idle.Stats().Resets + busy.Stats().Resets; r != 3 {
		t.Errorf("%d resets, want 3 (creation and two losses)", r)
	}
}

func TestRolledBackHashNeverGoesBelowTheProcess(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	g := newGen(t, c, prefix, "order", WithBatch(10))
	first := take(t, g, 25)
	settle(g)

	// A promoted replica that missed the last writes: the hash is back at
	// the first range's second, sequence 0.
	ts := first[0] >> seqBits
	if err := c.Do(context.Background(), c.B().Hset().Key(prefix+"{order}").FieldValue().
		FieldValue("ts", fmt.Sprint(ts)).FieldValue("seq", "0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// Another instance shares the rolled-back hash.
	other := newGen(t, newClient(t), prefix, "order", WithBatch(10))

	more := take(t, g, 100)
	otherIDs := take(t, other, 5)

	checkIncreasing(t, "rolled back", append(first, more...))
	// The other instance is safe only because the first one fetched before
	// it and stored its floor in the hash; in general a rollback within the
	// second is not (see the package documentation).
	checkUnique(t, first, more, otherIDs)
}

func TestClockBehindTheHash(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	now, err := redisSecond(c)
	if err != nil {
		t.Fatal(err)
	}
	// The hash is a second ahead of Redis's clock (the clock stepped back).
	if err := c.Do(context.Background(), c.B().Hset().Key(prefix+"{order}").FieldValue().
		FieldValue("ts", fmt.Sprint(now+1)).FieldValue("seq", "123").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	g := newGen(t, c, prefix, "order")

	id := take(t, g, 1)[0]

	if min := compose(now+1, 123); id < min {
		t.Errorf("id %d is below the hash's position %d", id, min)
	}
}

func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	p := testenv.StartProxy(t)
	g := newGen(t, p.Client(t), prefix, "order", WithBatch(10))
	before := take(t, g, 8)
	settle(g)

	p.Stop()
	var err error
	var during []int64
	for range 100 {
		var id int64
		if id, err = g.NextID(context.Background()); err != nil {
			break
		}
		during = append(during, id)
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("NextID with Redis unreachable: %v, want ErrUnavailable", err)
	}
	if multi, ok := err.(interface{ Unwrap() []error }); !ok || len(multi.Unwrap()) != 2 {
		t.Errorf("error %q does not wrap its cause", err)
	}
	// Only what was already fetched: the rest of the current range and the
	// one fetched ahead.
	if len(during) != 12 {
		t.Errorf("%d ids handed out with Redis unreachable, want the 12 held locally", len(during))
	}

	if err := p.Start(); err != nil {
		t.Fatalf("restarting the proxy: %v", err)
	}
	var after int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		if after, err = g.NextID(context.Background()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("NextID did not recover when Redis came back: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	all := append(append(before, during...), after)
	checkIncreasing(t, "across the outage", all)
	if st := g.Stats(); st.Failures == 0 {
		t.Errorf("Stats().Failures = 0 after an outage")
	}
}

func TestFloorFailure(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	errDB := errors.New("db down")
	g := newGen(t, c, prefix, "order", WithFloor(func(ctx context.Context) (int64, error) { return 0, errDB }))

	_, err := g.NextID(context.Background())

	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errDB) {
		t.Errorf("NextID = %v, want ErrUnavailable wrapping the floor's error", err)
	}
}

func TestTimeOutsideTheIDRange(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		epoch time.Time
	}{
		{"seconds overflow 31 bits", time.Now().Add(-(MaxSeconds + 10) * time.Second)},
		{"epoch in the future", time.Now().Add(time.Hour)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, prefix := testenv.Redis(t)
			g := newGen(t, c, prefix, "order", WithEpoch(tt.epoch))

			_, err := g.NextID(context.Background())

			if !errors.Is(err, ErrTimeRange) {
				t.Errorf("NextID = %v, want ErrTimeRange", err)
			}
		})
	}
}

func TestClose(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	g := newGen(t, c, prefix, "order")
	take(t, g, 1)

	g.Close()
	_, err := g.NextID(context.Background())

	if !errors.Is(err, ErrClosed) {
		t.Errorf("NextID after Close = %v, want ErrClosed", err)
	}
}

func TestComposeEndOfASecond(t *testing.T) {
	t.Parallel()
	for _, ts := range []int64{0, 1, 12_345_677, 12_345_678} {
		// A range that uses up its second ends where the next second begins.
		if end, next := compose(ts, 1<<seqBits), compose(ts+1, 0); end != next {
			t.Errorf("second %d: end of the sequence space %d, want the next second's first id %d", ts, end, next)
		}
		if s := (span{lo: compose(ts, 1<<31), hi: compose(ts, 1<<seqBits)}); s.len() != 1<<31 {
			t.Errorf("second %d: the upper half of the second spans %d ids, want %d", ts, s.len(), int64(1)<<31)
		}
	}
}

func TestDecompose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		epoch time.Time
		ts    int64
		seq   int64
	}{
		{"zero", DefaultEpoch, 0, 0},
		{"typical", DefaultEpoch, 12_345_678, 4321},
		{"largest", DefaultEpoch, MaxSeconds, seqMask},
		{"other epoch", time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC), 99, 1 << 31},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := compose(tt.ts, tt.seq)

			at, seq := Decompose(id, tt.epoch)

			if id < 0 {
				t.Fatalf("id %d is negative", id)
			}
			if want := tt.epoch.Add(time.Duration(tt.ts) * time.Second); !at.Equal(want) || int64(seq) != tt.seq {
				t.Errorf("Decompose(%d) = %v, %d, want %v, %d", id, at, seq, want, tt.seq)
			}
		})
	}
}

func TestDecomposeGeneratedID(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	g := newGen(t, c, prefix, "order")
	start, err := redisSecond(c)
	if err != nil {
		t.Fatal(err)
	}

	id := take(t, g, 1)[0]
	end, err := redisSecond(c)
	if err != nil {
		t.Fatal(err)
	}

	at, seq := Decompose(id, g.Epoch())
	if s := int64(at.Sub(DefaultEpoch) / time.Second); s < start || s > end {
		t.Errorf("id %d decomposes to second %d, want between %d and %d (Redis's clock)", id, s, start, end)
	}
	if seq != 0 {
		t.Errorf("the first id of a fresh hash has sequence %d, want 0", seq)
	}
}
