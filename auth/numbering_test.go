package auth

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedStore is a real store of buyer ids whose calls wait for open to
// close, and are counted.
type gatedStore struct {
	BuyerStore
	open  chan struct{}
	calls atomic.Int64
}

func (s *gatedStore) BuyerNumbers(ctx context.Context, issuer string, subjects []string) ([]int64, error) {
	s.calls.Add(1)
	<-s.open
	return s.BuyerStore.BuyerNumbers(ctx, issuer, subjects)
}

// TestNewSubjectsNumberedTogether: new subjects asked for while others
// are being numbered are numbered together, in one store call, not one
// each; concurrent requests of one subject get one buyer; every subject
// its own buyer; and another instance on the same store (another
// process's cache) gives each subject the same buyer.
func TestNewSubjectsNumberedTogether(t *testing.T) {
	const iss, subjects = "https://id.example.com", 50
	db := testBuyerStore(t)
	gated := &gatedStore{BuyerStore: db, open: make(chan struct{})}
	b := newBuyers(gated)
	ids := make([][2]int64, subjects)
	var wg sync.WaitGroup
	for i := range subjects {
		for c := range 2 {
			wg.Go(func() {
				var err error
				if ids[i][c], err = b.id(t.Context(), iss, "sub-"+strconv.Itoa(i)); err != nil {
					t.Errorf("id: %v", err)
				}
			})
		}
	}
	for waiting := 0; waiting < subjects; time.Sleep(time.Millisecond) {
		b.new.mu.Lock()
		waiting = len(b.new.flights)
		b.new.mu.Unlock()
	}
	close(gated.open)
	wg.Wait()
	// numberingSlots batches taken before the others came, then the rest.
	if n := gated.calls.Load(); n > numberingSlots+1 {
		t.Fatalf("%d subjects numbered in %d store calls; want at most %d", subjects, n, numberingSlots+1)
	}
	other := newBuyers(db)
	seen := map[int64]int{}
	for i, got := range ids {
		again, err := other.id(t.Context(), iss, "sub-"+strconv.Itoa(i))
		if err != nil || got[0] != got[1] || again != got[0] || got[0] <= BuyerBase {
			t.Fatalf("subject %d: buyers %v, then %d, %v from another instance; want one buyer above BuyerBase", i, got, again, err)
		}
		if j, ok := seen[got[0]]; ok {
			t.Fatalf("subjects %d and %d share buyer %d", i, j, got[0])
		}
		seen[got[0]] = i
	}
	b.new.mu.Lock()
	left := len(b.new.flights)
	b.new.mu.Unlock()
	// The queue leaves its map as its last worker leaves, just after the
	// last answer.
	queued := b.new.batches.Has(struct{}{})
	for deadline := time.Now().Add(5 * time.Second); queued && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		queued = b.new.batches.Has(struct{}{})
	}
	if left != 0 || queued {
		t.Fatalf("after: %d subjects waiting, a queue of batches %v; want none", left, queued)
	}
}

// TestNumberingGivesUp: a caller whose request ends stops waiting for a
// store that does not answer, with the buyer error, while another caller
// numbers the subject; the subject is numbered once the store answers.
func TestNumberingGivesUp(t *testing.T) {
	const iss = "https://id.example.com"
	gated := &gatedStore{BuyerStore: testBuyerStore(t), open: make(chan struct{})}
	b := newBuyers(gated)
	first := make(chan int64)
	go func() {
		id, err := b.id(t.Context(), iss, "slow") // numbers it: waits for the store
		if err != nil {
			t.Errorf("id: %v", err)
		}
		first <- id
	}()
	for gated.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := b.id(ctx, iss, "slow"); !errors.Is(err, errBuyer) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("id with a store that does not answer = %v; want the buyer error and the deadline", err)
	}
	close(gated.open)
	want := <-first
	if id, err := b.id(t.Context(), iss, "slow"); err != nil || id != want || id <= BuyerBase {
		t.Fatalf("id = %d, %v; want %d, above BuyerBase", id, err, want)
	}
}
