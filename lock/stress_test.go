package lock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// holdBook records the holds of one lock across clients and checks each
// new one against the holds before it.
type holdBook struct {
	mu        sync.Mutex
	active    map[*Lock]string
	lastFence int64
	bad       []string
}

// lostGrace is how long a holder whose lease ran out may take to be told:
// its timer goroutine has to be scheduled, on a loaded test machine.
const lostGrace = 250 * time.Millisecond

// acquired records that who holds l. Every other hold still recorded must
// have been told it is lost (within lostGrace), and l's fence must be the
// highest yet.
func (b *holdBook) acquired(l *Lock, who string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for a, w := range b.active {
		select {
		case <-a.Lost():
		case <-time.After(lostGrace):
			b.bad = append(b.bad, fmt.Sprintf("overlap: %s got fence %d while %s (fence %d) holds, not told it was lost", who, l.Fence(), w, a.Fence()))
		}
		delete(b.active, a)
	}
	if l.Fence() <= b.lastFence {
		b.bad = append(b.bad, fmt.Sprintf("fence order: %s got %d after %d", who, l.Fence(), b.lastFence))
	}
	b.lastFence = l.Fence()
	b.active[l] = who
}

func (b *holdBook) releasing(l *Lock) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.active, l)
}

// TestFaultsNeverLetHoldsOverlap has three clients, each behind a proxy
// that keeps freezing its requests or replies and cutting its connections,
// and three goroutines per client (watchdog and fixed leases, re-entries,
// extensions, waits given up) contend for one lock. Two holds may overlap
// only if the older holder was told it lost the lock; fences must rise in
// the order the lock is held; and once the faults stop, a free lock must
// be taken at once (nothing left behind in Redis).
func TestFaultsNeverLetHoldsOverlap(t *testing.T) {
	rc, prefix := testenv.Redis(t)
	book := &holdBook{active: map[*Lock]string{}}
	var proxies []*testenv.Proxy
	var clients []*Client
	for range 3 {
		p := testenv.StartProxy(t)
		c := New(p.Client(t), WithPrefix(prefix), WithHandoffLease(60*time.Millisecond),
			WithFallback(20*time.Millisecond, 60*time.Millisecond), WithTurnDuration(5*time.Millisecond))
		t.Cleanup(func() { c.Close() })
		proxies, clients = append(proxies, p), append(clients, c)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var holds atomic.Int64
	mutexOptions := []MutexOption{WithWatchdog(400 * time.Millisecond), WithWatchdog(400 * time.Millisecond), WithLease(400 * time.Millisecond)}
	for ci, c := range clients {
		for g, opt := range mutexOptions {
			m, who := c.Mutex("s", opt), fmt.Sprintf("client %d goroutine %d", ci, g)
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(200+mrand.IntN(3000))*time.Millisecond)
					l, err := m.Lock(ctx)
					cancel()
					if err != nil {
						continue // given up, or Redis unreachable: try again
					}
					holds.Add(1)
					book.acquired(l, who)
					time.Sleep(time.Duration(mrand.IntN(4000)) * time.Microsecond)
					if mrand.IntN(4) == 0 && l.Reenter(context.Background()) == nil {
						_ = l.Unlock(context.Background())
					}
					if mrand.IntN(8) == 0 {
						_ = l.Extend(context.Background(), 400*time.Millisecond)
					}
					book.releasing(l)
					// As the Unlock doc says: again after an error, and
					// while holds are left (a Reenter that failed may have
					// added one nobody knew of).
					for range 20 {
						err := l.Unlock(context.Background())
						if errors.Is(err, ErrNotHeld) || err == nil && l.Context().Err() != nil {
							break
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
			})
		}
	}
	for _, p := range proxies {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					p.Thaw()
					return
				case <-time.After(time.Duration(100+mrand.IntN(300)) * time.Millisecond):
				}
				faults := []func(){p.Cut, p.Freeze, p.Freeze, p.FreezeReplies, p.FreezeReplies, p.FreezeReplies}
				faults[mrand.IntN(len(faults))]()
				time.Sleep(time.Duration(mrand.IntN(150)) * time.Millisecond)
				p.Thaw()
			}
		})
	}
	time.Sleep(6 * time.Second)
	close(stop)
	wg.Wait()

	for _, s := range book.bad {
		t.Error(s)
	}
	if holds.Load() < 50 {
		t.Errorf("only %d holds in 6s: the lock hardly moved", holds.Load())
	}
	// Waiters that gave up, and holders told they lost the lock, must have
	// left nothing that holds up a new client for more than a lease.
	fresh := New(rc, WithPrefix(prefix))
	defer fresh.Close()
	start := time.Now()
	l := mustLock(t, timeout(t, 10*time.Second), fresh.Mutex("s"))
	if waited := time.Since(start); waited > time.Second {
		t.Errorf("a new client waited %v for the lock after every holder let go", waited)
	}
	mustUnlock(t, l)
}
