package async_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/async/consume"
	"github.com/flashsale/flashsale/async/internal/asynctest"
	"github.com/flashsale/flashsale/internal/testenv"
)

// clusterSale is a sale of several vouchers spread over a cluster's
// masters, with a Service that logs into a buffer.
type clusterSale struct {
	e        *env
	c        *testenv.Cluster
	logs     *testenv.Buffer
	vouchers []*flashsale.Voucher
	on       map[int64]*testenv.RedisServer // voucher → the master of its slot

	mu       sync.Mutex
	accepted map[int64]int64 // order → voucher
	codes    map[string]int
}

// newClusterSale sets up a sale on c under a prefix that pick accepts,
// with vouchers of stock created until each master holds at least two.
func newClusterSale(t *testing.T, c *testenv.Cluster, stock int, pick func(prefix string) bool) *clusterSale {
	t.Helper()
	client := c.Client(t)
	prefix := "test:" + testenv.Unique() + ":"
	for !pick(prefix) {
		prefix = "test:" + testenv.Unique() + ":"
	}
	deletePrefixAtEnd(t, client, prefix)
	dsn, url := asynctest.MySQLDatabase(t)
	s := &clusterSale{e: newEnvOn(t, client, prefix, dsn, url), c: c, logs: &testenv.Buffer{},
		on: map[int64]*testenv.RedisServer{}, accepted: map[int64]int64{}, codes: map[string]int{}}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), s.logs), &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc, err := async.NewService(client, s.e.DB, async.Config{Prefix: prefix, OrderIDs: s.e.IDs, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.e.Svc = svc
	perMaster := map[*testenv.RedisServer]int{}
	for len(s.vouchers) < 40 {
		v := s.e.Voucher(stock)
		m := c.MasterOf(testenv.Slot(svc.Keys().Voucher(v.ID).Meta))
		s.vouchers, s.on[v.ID] = append(s.vouchers, v), m
		perMaster[m]++
		if len(perMaster) == len(c.Masters()) && minCount(perMaster) >= 2 {
			break
		}
	}
	return s
}

func minCount(m map[*testenv.RedisServer]int) int {
	least := -1
	for _, n := range m {
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}

// watch runs the epoch watch, every 20ms, until the test ends.
func (s *clusterSale) watch() {
	e := s.e
	if _, err := e.Svc.CheckEpoch(context.Background()); err != nil {
		e.T.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { e.Svc.WatchEpoch(ctx, 20*time.Millisecond) })
	e.T.Cleanup(func() { stop(); wg.Wait() })
}

// sell has users 1..Buyers order, 16 at once, user u the voucher u mod
// len(vouchers); after calls the first time trigger orders are accepted
// in total.
func (s *clusterSale) sell(buyers int64, trigger int, after func()) {
	var next atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for u := next.Add(1); u <= buyers; u = next.Add(1) {
				v := s.vouchers[int(u)%len(s.vouchers)]
				o, err := s.e.Svc.PlaceOrder(context.Background(), flashsale.OrderRequest{VoucherID: v.ID, UserID: u})
				s.mu.Lock()
				if err != nil {
					s.codes[asynctest.Code(err)]++
				} else {
					s.accepted[o.ID] = v.ID
				}
				n := len(s.accepted)
				s.mu.Unlock()
				if after != nil && n >= trigger {
					once.Do(after)
				}
			}
		})
	}
	wg.Wait()
}

// drain sells again until every voucher is sold out in Redis (buyers
// refused while a node was down try again), then waits until MySQL has
// every order.
func (s *clusterSale) drain(buyers int64) {
	e := s.e
	for pass := 0; pass < 5 && !s.soldOut(); pass++ {
		s.sell(buyers, 0, nil)
	}
	e.WaitFor("the sale to drain and sell out in MySQL", 90*time.Second, func() (bool, error) {
		b, err := e.Svc.Backlog(context.Background())
		if err != nil || b > 0 {
			return false, nil
		}
		for _, v := range s.vouchers {
			if a, err := e.DB.AuditVoucher(context.Background(), v.ID); err != nil || a.Remaining != 0 {
				return false, err
			}
		}
		return true, nil
	})
}

// soldOut reports whether every voucher's stock in Redis is 0.
func (s *clusterSale) soldOut() bool {
	for _, v := range s.vouchers {
		st, err := async.ReadState(context.Background(), s.e.Client, s.e.Prefix, v.ID)
		if err != nil || !st.Loaded || st.Stock != 0 {
			return false
		}
	}
	return true
}

// checkMySQL checks each voucher sold exactly its stock in MySQL, a unit
// per buyer, and returns, per voucher, the accepted orders not there.
func (s *clusterSale) checkMySQL() map[int64]int64 {
	e := s.e
	ctx := context.Background()
	for _, v := range s.vouchers {
		a, err := e.DB.AuditVoucher(ctx, v.ID)
		if err != nil {
			e.T.Fatal(err)
		}
		if a.Orders != v.Stock || a.Remaining != 0 || a.DistinctBuyers != v.Stock || a.DuplicateBuyers != 0 {
			e.T.Errorf("voucher %d (on %s): MySQL audit %+v; want %d orders by as many buyers", v.ID, s.on[v.ID].Addr(), a, v.Stock)
		}
	}
	lost := map[int64]int64{}
	for id, v := range s.accepted {
		o, err := e.DB.FindOrder(ctx, id)
		switch {
		case asynctest.Code(err) == flashsale.ENotFound:
			lost[v]++
		case err != nil:
			e.T.Fatal(err)
		case o.VoucherID != v:
			e.T.Errorf("order %d: voucher %d in MySQL, accepted for %d", id, o.VoucherID, v)
		}
	}
	return lost
}

// logged returns the vouchers named by log lines that contain marker.
func (s *clusterSale) logged(marker string) map[int64]bool {
	named := map[int64]bool{}
	re := regexp.MustCompile(`\bvoucher=(\d+)`)
	for line := range strings.Lines(s.logs.String()) {
		if strings.Contains(line, marker) {
			if m := re.FindStringSubmatch(line); m != nil {
				id, _ := strconv.ParseInt(m[1], 10, 64)
				named[id] = true
			}
		}
	}
	return named
}

// TestClusterMasterRestartedEmptyIsNoticed sells 6+ vouchers spread over a
// 3-master cluster without replicas, with 16 buyers at once and the epoch
// watch running, the consumer not yet (so accepted orders are surely
// lost), and SIGKILLs mid-sale the master that holds
// the voucher registry but not <prefix>epoch, then starts it again on its
// port and nodes.conf with no data: no failover, the same master, empty.
// The service notices it by that master's own epoch key: it logs REDIS
// LOST ITS DATA naming the node and only vouchers on it, records the loss
// for reconcile (node and bound), reloads those vouchers from MySQL and
// registers the other vouchers again for the consumers. Every voucher
// sells exactly its stock in MySQL, the orders lost are within the bound,
// and no voucher on another master loses an order or is reported.
func TestClusterMasterRestartedEmptyIsNoticed(t *testing.T) {
	c := testenv.StartCluster(t, testenv.WithoutReplicas())
	owner := func(key string) *testenv.RedisServer { return c.MasterOf(testenv.Slot(key)) }
	s := newClusterSale(t, c, 40, func(p string) bool { return owner(p+"epoch") != owner(p+"vouchers") })
	victim := owner(s.e.Keys.Registry())
	s.watch()
	total := 0
	for _, v := range s.vouchers {
		total += v.Stock
	}
	buyers := int64(3 * total)
	s.sell(buyers, total/3, func() { victim.Kill(); victim.Start() })
	ctx := context.Background()
	s.e.WaitFor("the loss to be recorded", 60*time.Second, func() (bool, error) {
		_, losses, err := async.ReadEpochs(ctx, s.e.Client, s.e.Prefix)
		return err == nil && len(losses) > 0, nil
	})
	s.e.Run(consume.New(s.e.Client, s.e.DB, s.e.ConsumerConfig()))
	s.drain(buyers)

	lost := s.checkMySQL()
	_, losses, err := async.ReadEpochs(ctx, s.e.Client, s.e.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(losses) != 1 || losses[0].Node != victim.Addr() || losses[0].Kind != async.LossEmptied {
		t.Fatalf("losses recorded: %+v; want one, emptied, on %s", losses, victim.Addr())
	}
	bound := map[int64]int64{}
	for part := range strings.SplitSeq(losses[0].Vouchers, ",") {
		var id, n int64
		if _, err := fmt.Sscanf(part, "%d:%d", &id, &n); err == nil {
			bound[id] = n
		}
	}
	t.Logf("victim %s; vouchers %d; loss %+v; lost %v; refusals %v", victim.Addr(), len(s.vouchers), losses[0], lost, s.codes)
	for _, v := range s.vouchers {
		on := s.on[v.ID] == victim
		if !on && (lost[v.ID] > 0 || bound[v.ID] > 0) {
			t.Errorf("voucher %d on %s, not the restarted master: %d orders lost, %d reported", v.ID, s.on[v.ID].Addr(), lost[v.ID], bound[v.ID])
		}
		if on && lost[v.ID] > bound[v.ID] {
			t.Errorf("voucher %d on the restarted master: %d accepted orders lost, reported at most %d", v.ID, lost[v.ID], bound[v.ID])
		}
	}
	if len(bound) == 0 || len(lost) == 0 {
		t.Errorf("the loss names no voucher, or no accepted order was lost: the test proves nothing: %+v, lost %v", losses[0], lost)
	}
	for _, marker := range []string{"REDIS LOST ITS DATA", "ACCEPTED ORDERS LOST"} {
		for id := range s.logged(marker) {
			if s.on[id] != victim {
				t.Errorf("%s logged for voucher %d on %s, not the restarted master", marker, id, s.on[id].Addr())
			}
		}
	}
	if !strings.Contains(s.logs.String(), "node="+victim.Addr()) {
		t.Errorf("the log does not name the node %s:\n%s", victim.Addr(), s.logs.String())
	}
}

// TestClusterSlotMigrationIsNoLoss moves, mid-sale on a 3-master cluster
// with the epoch watch and the consumer running, the slot of a master's
// epoch key and then a voucher's slot to other masters, keys and all: the
// watch then reads another key for the master left without one, but
// notices no loss; nothing is logged or recorded as lost, and every
// accepted order is persisted.
func TestClusterSlotMigrationIsNoLoss(t *testing.T) {
	c := testenv.StartCluster(t, testenv.WithoutReplicas())
	s := newClusterSale(t, c, 40, func(string) bool { return true })
	s.watch()
	s.e.Run(consume.New(s.e.Client, s.e.DB, s.e.ConsumerConfig()))
	ctx := context.Background()
	keysNow := func() []string {
		top, err := s.e.Svc.ReadTopology(ctx)
		if err != nil {
			t.Error(err)
		}
		return async.EpochKeys(s.e.Keys, top)
	}
	before := keysNow()
	if len(before) != 1+len(c.Masters()) {
		t.Fatalf("epoch keys %v; want <prefix>epoch and one per master", before)
	}
	moved := testenv.Slot(before[1])
	voucher := s.vouchers[0]
	migrate := func() {
		from := c.MasterOf(moved)
		for _, m := range c.Masters() {
			if m != from {
				c.MigrateSlot(t, moved, m)
				break
			}
		}
		vslot := testenv.Slot(s.e.Keys.Voucher(voucher.ID).Meta)
		for _, m := range c.Masters() {
			if m != c.MasterOf(vslot) {
				c.MigrateSlot(t, vslot, m)
				break
			}
		}
		time.Sleep(200 * time.Millisecond) // a few checks on the new slot map
	}
	total := 0
	for _, v := range s.vouchers {
		total += v.Stock
	}
	s.sell(int64(3*total), total/4, migrate)
	after := keysNow()
	t.Logf("epoch keys before %v, after %v", before, after)
	if strings.Join(before, " ") == strings.Join(after, " ") {
		t.Errorf("the epoch keys did not change with the slot map: the test proves nothing")
	}
	s.drain(int64(3 * total))
	if lost := s.checkMySQL(); len(lost) > 0 {
		t.Errorf("accepted orders lost: %v", lost)
	}
	if _, losses, err := async.ReadEpochs(ctx, s.e.Client, s.e.Prefix); err != nil || len(losses) > 0 {
		t.Errorf("losses recorded: %+v, %v; want none", losses, err)
	}
	for _, marker := range []string{"REDIS LOST", "ACCEPTED ORDERS LOST"} {
		if strings.Contains(s.logs.String(), marker) {
			t.Errorf("%s logged:\n%s", marker, s.logs.String())
		}
	}
}
