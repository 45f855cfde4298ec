package strategy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lock"
	"github.com/flashsale/flashsale/strategy"
	"github.com/redis/rueidis"
)

// TestStocklockFenceRefusesAHolderPausedPastItsLease runs stocklock on
// three instances (each with its own lock client and Redis connection)
// with a lease shorter than the pause some holders take inside the
// critical section: their leases run out and the next holder goes in, but
// the fence refuses the stale holders' stock writes, so nothing is
// oversold and every unit sold has its order.
func TestStocklockFenceRefusesAHolderPausedPastItsLease(t *testing.T) {
	const stock, buyers = 15, 60
	f := newFixture(t)
	vid := f.voucher(t, stock)
	var instances []flashsale.OrderService
	for range 3 {
		rc, err := rueidis.NewClient(testenv.RedisOption())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(rc.Close)
		locks := lock.New(rc, lock.WithPrefix(f.prefix+"lock:"))
		t.Cleanup(func() { locks.Close() })
		s, err := strategy.New("stocklock", strategy.Config{DB: f.db, IDs: f.ids, Locks: locks,
			LockLease: 50 * time.Millisecond, Pause: 150 * time.Millisecond, PauseEvery: 4, LockWait: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		instances = append(instances, s)
	}
	var (
		mu            sync.Mutex
		stale, placed int
		wg            sync.WaitGroup
	)
	for u := range buyers {
		wg.Go(func() {
			_, err := instances[u%3].PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: vid, UserID: int64(u + 1)})
			mu.Lock()
			defer mu.Unlock()
			switch code := flashsale.ErrorCode(err); {
			case errors.Is(err, strategy.ErrStaleLock) && code == flashsale.EBusy:
				stale++
			case err == nil:
				placed++
			case code != flashsale.ESoldOut:
				t.Errorf("buyer %d: %v", u+1, err)
			}
		})
	}
	wg.Wait()
	a, err := f.db.AuditVoucher(context.Background(), vid)
	if err != nil {
		t.Fatal(err)
	}
	if a.Orders != placed || a.Orders+a.Remaining != stock || a.Orders > stock {
		t.Fatalf("audit %+v, %d placed: want orders = placed and orders + remaining = %d (nothing oversold)", a, placed, stock)
	}
	if stale == 0 {
		t.Fatal("no stale write was refused: the pauses did not outlast the lease")
	}
	t.Logf("%d orders, %d remaining, %d stale writes refused", a.Orders, a.Remaining, stale)
}
