package idgen

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flashsale/flashsale/internal/hashslot"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// The multi-process test re-runs this test binary as an ID taker: with
// childEnv set to a prefix, it prints "<id>" lines, childEach IDs of each
// slot in childSlots taken by concurrent goroutines, and exits.
const (
	childEnv   = "IDGEN_TEST_CHILD"
	childSlots = "IDGEN_TEST_SLOTS" // comma-separated
	childBatch = "IDGEN_TEST_BATCH"
	childEach  = 2000
)

func TestMain(m *testing.M) {
	if prefix := os.Getenv(childEnv); prefix != "" {
		if err := runChild(prefix); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

// runChild takes childEach IDs of every slot of childSlots, 4 goroutines
// per slot, and prints them.
func runChild(prefix string) error {
	c, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		return err
	}
	defer c.Close()
	batch, _ := strconv.ParseInt(os.Getenv(childBatch), 10, 64)
	s := NewSlots(c, "order", WithPrefix(prefix), WithBatch(batch))
	defer s.Close()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for f := range strings.SplitSeq(os.Getenv(childSlots), ",") {
		slot, _ := strconv.Atoi(f)
		for range 4 {
			wg.Go(func() {
				for range childEach / 4 {
					id, err := s.NextIDIn(context.Background(), slot)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					fmt.Fprintln(out, id)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// TestSlotsUniqueAcrossProcesses runs three processes, each taking IDs of
// overlapping sets of slots from many goroutines with different batch
// sizes, and checks that no ID comes out twice and every ID carries the
// slot it was asked for.
func TestSlotsUniqueAcrossProcesses(t *testing.T) {
	t.Parallel()
	_, prefix := testenv.Redis(t)
	slotSets := []string{"0,7,16383", "7,300,16383", "0,300,9000"}
	lists := make([][]int64, len(slotSets))
	var wg sync.WaitGroup
	for i, slots := range slotSets {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run", "^$")
			cmd.Env = append(os.Environ(), childEnv+"="+prefix, childSlots+"="+slots, childBatch+"="+strconv.Itoa(7+113*i))
			cmd.Stderr = t.Output()
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("child %d: %v", i, err)
				return
			}
			for f := range strings.FieldsSeq(string(out)) {
				id, err := strconv.ParseInt(f, 10, 64)
				slot, ok := Slot(id)
				if err != nil || !ok || !strings.Contains(","+slots+",", ","+strconv.Itoa(slot)+",") {
					t.Errorf("child %d (slots %s) printed %q, of slot %d (%v)", i, slots, f, slot, ok)
					return
				}
				lists[i] = append(lists[i], id)
			}
		})
	}
	wg.Wait()
	if n := checkUnique(t, lists...); n != 9*childEach {
		t.Errorf("%d unique ids, want %d", n, 9*childEach)
	}
}

// TestSlottedIDs checks what a slotted ID holds, that a slot's IDs
// increase, that its hash lives in the slot and that the hash restarts
// past a plain floor ID when lost.
func TestSlottedIDs(t *testing.T) {
	t.Parallel()
	c, prefix := testenv.Redis(t)
	var floor atomic.Int64
	floorFn := WithFloor(func(context.Context) (int64, error) { return floor.Load(), nil })
	s := NewSlots(c, "order", WithPrefix(prefix), WithBatch(10), floorFn)
	t.Cleanup(s.Close)
	for _, slot := range []int{0, 5461, 16383} {
		var ids []int64
		for range 25 {
			id, err := s.NextIDIn(context.Background(), slot)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := Slot(id); !ok || got != slot {
				t.Fatalf("id %d of slot %d carries slot %d (%v)", id, slot, got, ok)
			}
			if id <= 1<<62 {
				t.Fatalf("slotted id %d is not above every plain id", id)
			}
			ids = append(ids, id)
		}
		checkIncreasing(t, fmt.Sprintf("slot %d", slot), ids)
		key := prefix + "{" + hashslot.Tag(slot) + "}:order"
		if hashslot.Of(key) != slot {
			t.Fatalf("the hash of slot %d, %s, is in slot %d", slot, key, hashslot.Of(key))
		}
		if n, err := c.Do(context.Background(), c.B().Exists().Key(key).Build()).AsInt64(); err != nil || n != 1 {
			t.Fatalf("the hash of slot %d, %s, exists: %d, %v", slot, key, n, err)
		}
	}

	// Lose slot 0's hash with a plain floor ID far in the future: the slot
	// restarts past the floor's second.
	s.Close()
	now, err := redisSecond(c)
	if err != nil {
		t.Fatal(err)
	}
	floor.Store(compose(now+1, 77))
	fresh := NewSlots(c, "order", WithPrefix(prefix), floorFn)
	t.Cleanup(fresh.Close)
	if err := c.Do(context.Background(), c.B().Del().Key(prefix+"{"+hashslot.Tag(0)+"}:order").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	id, err := fresh.NextIDIn(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if Second(id) <= now+1 {
		t.Fatalf("after the loss, id %d is in second %d, not past the floor's %d", id, Second(id), now+1)
	}
	if at, seq, slot := DecomposeSlotted(id, DefaultEpoch); slot != 0 || seq != 0 || at.Unix()-DefaultEpoch.Unix() != Second(id) {
		t.Fatalf("DecomposeSlotted(%d) = %v, %d, %d", id, at, seq, slot)
	}
}
