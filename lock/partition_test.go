package lock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// partitionFigures is what the lock's partition test counts: grants, and
// grants whose fence did not rise above every fence granted before (the
// new primary did not know an earlier grant: two holders, as a fenced
// resource sees them), and grants while another client held the lock.
type partitionFigures struct {
	grants, fenceBackwards, overlaps, notReplicated int
}

// lockUnderPartition runs four clients (each its own rueidis client, all
// reaching every node) taking one lock in turn, each holding it 30ms,
// while the primary is cut off from its Sentinels and two replicas until
// a replica is promoted and a second more (nemesis (a) of the partition
// tests in cmd/flashsale), then for two seconds after the failover.
func lockUnderPartition(t *testing.T, opts ...MutexOption) partitionFigures {
	n := testenv.StartNet(t)
	set := testenv.StartNetSentinelSet(t, n, 2)
	prefix := "partition:" + testenv.Unique() + ":"
	var (
		mu       sync.Mutex
		f        partitionFigures
		maxFence int64
		holding  int
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 4 {
		c := New(set.Client(t), WithPrefix(prefix))
		t.Cleanup(func() { c.Close() })
		m := c.Mutex("stock", append([]MutexOption{WithLease(3 * time.Second)}, opts...)...)
		wg.Go(func() {
			for ctx.Err() == nil {
				lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				l, err := m.Lock(lctx)
				cancel()
				if err != nil {
					if errors.Is(err, ErrNotReplicated) {
						mu.Lock()
						f.notReplicated++
						mu.Unlock()
					}
					time.Sleep(20 * time.Millisecond)
					continue
				}
				mu.Lock()
				f.grants++
				if l.Fence() <= maxFence {
					f.fenceBackwards++
				}
				maxFence = max(maxFence, l.Fence())
				if holding++; holding > 1 {
					f.overlaps++
				}
				mu.Unlock()
				time.Sleep(30 * time.Millisecond)
				mu.Lock()
				holding--
				mu.Unlock()
				uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = l.Unlock(uctx) // a lock lost in the failover answers an error
				cancel()
			}
		})
	}
	time.Sleep(time.Second)
	old := set.Primary()
	var rest []*testenv.NetNode
	for _, s := range append(set.Replicas(), set.Sentinels()...) {
		rest = append(rest, s.NetNode())
	}
	n.Partition([]*testenv.NetNode{old.NetNode()}, rest)
	set.WaitPromoted(t, old.Addr(), 60*time.Second)
	time.Sleep(time.Second)
	n.Heal()
	set.WaitFailover(t, old.Addr(), 60*time.Second)
	time.Sleep(2 * time.Second)
	stop()
	wg.Wait()
	t.Logf("%s: grants %d, fence not rising %d, two holders at once %d, not confirmed by replicas %d",
		t.Name(), f.grants, f.fenceBackwards, f.overlaps, f.notReplicated)
	if f.grants == 0 {
		t.Error("no lock granted")
	}
	return f
}

// TestPartitionLockWithReplicas: with WithReplicas(2) (every replica) a
// grant is on every replica a failover may promote: the primary cut off
// from them grants nothing, and the fence never goes back.
func TestPartitionLockWithReplicas(t *testing.T) {
	t.Parallel()
	f := lockUnderPartition(t, WithReplicas(2, 500*time.Millisecond))
	if f.fenceBackwards != 0 || f.overlaps != 0 {
		t.Errorf("WithReplicas(2) under a partition: %+v; want no fence going back, never two holders", f)
	}
}

// TestPartitionLockWithoutReplicas: the same without WithReplicas, for
// the figures (docs/partitions.md): the isolated primary goes on granting
// until the clients follow the failover, and the promoted replica does not
// know those grants. It asserts nothing lockUnderPartition does not in
// TestPartitionLockWithReplicas, so it runs only with -partition-figures
// or FLASHSALE_PARTITION_FIGURES=1.
func TestPartitionLockWithoutReplicas(t *testing.T) {
	testenv.SkipUnlessPartitionFigures(t)
	t.Parallel()
	lockUnderPartition(t)
}
