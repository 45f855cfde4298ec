package strategy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/idgen"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/store"
	"github.com/flashsale/flashsale/strategy"
	"github.com/redis/rueidis"
)

// The multi-process tests re-run this test binary as a seller process, an
// instance of the batch strategy, configured through these variables. It
// prints "created <user> <order id>" for each order it was told is
// created, one write per line, and exits when it has tried every buyer.
const (
	sellerEnv     = "STRATEGY_TEST_SELLER" // the database URL; set: run a seller instead of the tests
	sellerPrefix  = "STRATEGY_TEST_PREFIX" // the ID generator's Redis prefix
	sellerVoucher = "STRATEGY_TEST_VOUCHER"
	sellerUsers   = "STRATEGY_TEST_USERS" // "first-last": buyers to try, in a shuffled order
	sellerClicks  = "STRATEGY_TEST_CLICKS"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(sellerEnv); url != "" {
		if err := runSeller(url); err != nil {
			fmt.Fprintln(os.Stderr, "seller:", err)
			os.Exit(1)
		}
		return
	}
	os.Exit(testenv.RunMain(m))
}

// runSeller is the seller process: 32 goroutines place the orders.
func runSeller(url string) error {
	ctx := context.Background()
	rc, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		return err
	}
	defer rc.Close()
	db, err := store.Open(ctx, url)
	if err != nil {
		return err
	}
	defer db.Close()
	ids := idgen.New(rc, "id", idgen.WithPrefix(os.Getenv(sellerPrefix)))
	defer ids.Close()
	s, err := strategy.New("batch", strategy.Config{DB: db, IDs: ids})
	if err != nil {
		return err
	}
	vid, _ := strconv.ParseInt(os.Getenv(sellerVoucher), 10, 64)
	var first, last int64
	if _, err := fmt.Sscanf(os.Getenv(sellerUsers), "%d-%d", &first, &last); err != nil {
		return fmt.Errorf("%s: %w", sellerUsers, err)
	}
	clicks, _ := strconv.Atoi(os.Getenv(sellerClicks))
	attempts := make(chan int64)
	go func() {
		for _, i := range rand.Perm(int(last-first+1) * clicks) {
			attempts <- first + int64(i/clicks)
		}
		close(attempts)
	}()
	var (
		wg  sync.WaitGroup
		out sync.Mutex
	)
	for range 32 {
		wg.Go(func() {
			for user := range attempts {
				o, err := s.PlaceOrder(ctx, flashsale.OrderRequest{VoucherID: vid, UserID: user})
				if err == nil {
					out.Lock()
					fmt.Fprintf(os.Stdout, "created %d %d\n", user, o.ID)
					out.Unlock()
				} else if code := flashsale.ErrorCode(err); code != flashsale.ESoldOut && code != flashsale.EDuplicateOrder {
					fmt.Fprintf(os.Stderr, "user %d: %v\n", user, err)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// seller is a running seller process and what it reported.
type seller struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when its output is read and it exited
	// created is the order id by user it was told created; read after done.
	created map[int64]int64
	stderr  *os.File
}

// startSeller starts a seller for the buyers first..last, each clicking
// clicks times. It is killed when the test ends.
func startSeller(t *testing.T, url, prefix string, voucherID, first, last int64, clicks int) *seller {
	t.Helper()
	stderr, err := os.CreateTemp(t.TempDir(), "seller-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sellerEnv+"="+url, sellerPrefix+"="+prefix,
		fmt.Sprintf("%s=%d", sellerVoucher, voucherID), fmt.Sprintf("%s=%d-%d", sellerUsers, first, last),
		fmt.Sprintf("%s=%d", sellerClicks, clicks))
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &seller{cmd: cmd, done: make(chan struct{}), created: map[int64]int64{}, stderr: stderr}
	go func() {
		defer close(p.done)
		p.read(t, stdout)
		_ = cmd.Wait() // the exit status is read through ProcessState
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// read collects the created lines.
func (p *seller) read(t *testing.T, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		var user, id int64
		if _, err := fmt.Sscanf(sc.Text(), "created %d %d", &user, &id); err != nil {
			t.Errorf("seller printed %q: %v", sc.Text(), err)
			continue
		}
		p.created[user] = id
	}
}

// startSellers creates a voucher of stock units in a fresh MariaDB
// database and starts one seller per range of buyers (first, last), each
// buyer clicking clicks times.
func startSellers(t *testing.T, stock, clicks int, buyers ...[2]int64) (*fixture, int64, []*seller) {
	t.Helper()
	url := testenv.MySQLURL(t)
	f := newFixtureOn(t, url)
	vid := f.voucher(t, stock)
	sellers := make([]*seller, len(buyers))
	for i, r := range buyers {
		sellers[i] = startSeller(t, url, f.prefix, vid, r[0], r[1], clicks)
	}
	return f, vid, sellers
}

// addTo adds the orders the seller was told created to created (by user),
// failing the test for a user told created twice.
func (p *seller) addTo(t *testing.T, created map[int64]*flashsale.Order) {
	t.Helper()
	for user, id := range p.created {
		if created[user] != nil {
			t.Errorf("user %d told created by two processes", user)
		}
		created[user] = &flashsale.Order{ID: id, Status: flashsale.StatusCreated}
	}
}

// wait waits for the seller to exit and fails the test unless it exited
// cleanly, or by SIGKILL when killed.
func (p *seller) wait(t *testing.T, killed bool) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatal("seller did not finish")
	}
	st := p.cmd.ProcessState
	sig := st.Sys().(syscall.WaitStatus).Signal()
	if (killed && sig != syscall.SIGKILL) || (!killed && !st.Success()) {
		log, _ := os.ReadFile(p.stderr.Name())
		t.Fatalf("seller exited %v (killed: %v):\n%s", st, killed, log)
	}
}

// TestBatchSellersInProcesses runs three batch instances as separate
// processes against one MariaDB database, each trying the same 1000 buyers
// twice in its own order, for 200 units: 200 orders, each buyer at most
// one, and the orders stored are exactly those some process answered
// created.
func TestBatchSellersInProcesses(t *testing.T) {
	const stock, buyers = 200, 1000
	all := [2]int64{1, buyers}
	f, vid, sellers := startSellers(t, stock, 2, all, all, all)
	created := map[int64]*flashsale.Order{}
	for _, p := range sellers {
		p.wait(t, false)
		p.addTo(t, created)
	}
	if len(created) != stock {
		t.Errorf("%d buyers told created, want %d", len(created), stock)
	}
	wantStored(t, f.db, vid, created)
	wantConsistent(t, f.db, vid, stock, len(created))
}

// TestBatchSellerKilled SIGKILLs batch instances while they commit orders
// non-stop against one MariaDB database, one after another: nothing is
// half-written (every order holds a unit, every unit taken has its order),
// no buyer holds two orders, and every order an instance reported created
// before it died is stored.
func TestBatchSellerKilled(t *testing.T) {
	const stock = 1_000_000
	f, vid, sellers := startSellers(t, stock, 1, [2]int64{1, 100_000}, [2]int64{100_001, 200_000}, [2]int64{200_001, 300_000})
	ctx := context.Background()
	created := map[int64]*flashsale.Order{}
	for i, p := range sellers {
		// Wait until 300 more orders are committed, then kill this seller
		// while it and the ones still alive keep committing.
		before := ordersOf(t, f.db, vid)
		for deadline := time.Now().Add(time.Minute); ordersOf(t, f.db, vid) < before+300; {
			if time.Now().After(deadline) {
				t.Fatalf("seller %d: no progress", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t, true)
		p.addTo(t, created)
	}
	if len(created) == 0 {
		t.Fatal("no seller reported an order")
	}
	wantStored(t, f.db, vid, created)
	a, err := f.db.AuditVoucher(ctx, vid)
	if err != nil {
		t.Fatal(err)
	}
	wantConsistent(t, f.db, vid, stock, a.Orders)
	t.Logf("%d orders stored, %d reported created before the kills", a.Orders, len(created))
}

// ordersOf returns the voucher's order count.
func ordersOf(t *testing.T, db *store.DB, voucherID int64) int {
	t.Helper()
	a, err := db.AuditVoucher(context.Background(), voucherID)
	if err != nil {
		t.Fatal(err)
	}
	return a.Orders
}

// wantConsistent fails the test unless the voucher has orders orders from
// as many buyers and stock-orders units left.
func wantConsistent(t *testing.T, db *store.DB, voucherID int64, stock, orders int) {
	t.Helper()
	a, err := db.AuditVoucher(context.Background(), voucherID)
	if err != nil || a.Orders != orders || a.DistinctBuyers != orders || a.DuplicateBuyers != 0 || a.Remaining != stock-orders {
		t.Fatalf("audit %+v, %v; want %d orders from distinct buyers and %d left", a, err, orders, stock-orders)
	}
}
