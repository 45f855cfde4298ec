package main

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/flashsale"
	"github.com/flashsale/flashsale/async"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/lab"
	"github.com/flashsale/flashsale/store"
)

// The partition tests (Jepsen's nemeses, on network namespaces: see
// testenv.Net) run the async pipeline on a primary with two replicas and
// three Sentinels, each in a namespace of its own, and two serve
// instances (with their consumers) in two more; buyers, the test, reach
// every one. A sale runs at a steady pace; at a quarter of the stock the
// nemesis cuts the network, heals it once the Sentinels have promoted a
// replica (or after a while), and buyers whose clicks met the fault try
// again. Then the pipeline drains and the outcome is counted. The figures
// of modes that promise nothing under partitions are logged (the table in
// docs/partitions.md comes from them) and run only with -partition-figures
// or FLASHSALE_PARTITION_FIGURES=1 (without, TestPartitionStartLogs checks
// what they assert besides); the shipped configuration's are asserted,
// always.
const (
	partitionStock = 600
	partitionUsers = 3000
)

// partitionMode is a durability mode and the Redis configuration it runs on.
type partitionMode struct {
	name string
	args []string // serve's durability flags
	opts []testenv.ServerOption
	// promise: nothing accepted is lost under a partition of the data
	// nodes, and no buyer is told two orders.
	promise bool
	// logs: what serve says at start about partitions.
	logs string
}

var partitionModes = []partitionMode{
	{name: "memory", args: []string{"--durability", "memory"}},
	{name: "aof", args: []string{"--durability", "aof"}, opts: []testenv.ServerOption{testenv.WithAOF()}},
	{name: "replica1", args: []string{"--durability", "replica", "--min-replicas", "1"}, logs: async.PartitionWarning},
	{name: "replica-all", args: []string{"--durability", "replica", "--min-replicas", "2"}, opts: partitionSafeRedis, promise: true,
		logs: "a network partition loses no accepted order"},
}

// partitionSafeRedis is the primary's side of the shipped configuration.
var partitionSafeRedis = []testenv.ServerOption{
	testenv.WithConfig("min-replicas-to-write", "2"), testenv.WithConfig("min-replicas-max-lag", "2"),
}

// partitionRig is one partition test's network, Redis set and instances.
type partitionRig struct {
	*saleRig
	net    *testenv.Net
	set    *testenv.SentinelSet
	serves []*testenv.NetNode
	urls   []string
	logs   []string // serve's log files
}

// newPartitionRig starts the set and two serve instances in the mode and
// creates the sale's voucher.
func newPartitionRig(t *testing.T, m partitionMode) *partitionRig {
	n := testenv.StartNet(t)
	set := testenv.StartNetSentinelSet(t, n, 2, m.opts...)
	// The instances reach MySQL through the test's namespace.
	dbURL, err := url.Parse(testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	dbURL.Host = n.Forward(dbURL.Host)
	p := &partitionRig{saleRig: newSaleRig(t, dbURL.String()), net: n, set: set}
	p.redisURL, p.redis, p.prefix = set.URL(), set.Client(t), "fs:"
	for i := range 2 {
		nd := n.Node(fmt.Sprintf("serve%d", i))
		args := append([]string{"serve", "--addr", nd.IP + ":0", "--strategy", "async", "--consume", "--claim-idle", "2s",
			"--replica-timeout", "1s"}, m.args...)
		c := p.command(args...)
		in := nd.Command(c.Path, c.Args[1:]...)
		in.Env = c.Env
		proc, err := lab.StartProcess(context.Background(), in, p.logPath("serve"), 60*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { proc.Kill() })
		p.serves, p.urls, p.logs = append(p.serves, nd), append(p.urls, proc.URL), append(p.logs, proc.Log)
	}
	p.createStock(p.urls[0], partitionStock)
	set.WaitReplicaSync(t)
	return p
}

// others returns the set's processes other than the given ones.
func (p *partitionRig) others(but ...*testenv.RedisServer) []*testenv.NetNode {
	var nodes []*testenv.NetNode
	for _, s := range append(p.set.Replicas(), p.set.Sentinels()...) {
		if !containsServer(but, s) {
			nodes = append(nodes, s.NetNode())
		}
	}
	return nodes
}

func containsServer(list []*testenv.RedisServer, s *testenv.RedisServer) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// nemesis cuts the network, waits, and heals it.
type nemesis func(p *partitionRig)

// primaryIsolated: the primary cut from the Sentinels and the replicas,
// while the instances (and buyers) still reach it, until a replica is
// promoted and a second more.
func primaryIsolated(p *partitionRig) {
	old := p.set.Primary()
	p.net.Partition([]*testenv.NetNode{old.NetNode()}, p.others(old))
	p.waitPromoted(old)
}

// primaryMinority: the primary, one replica and one Sentinel on one side;
// the other replica and two Sentinels (a majority) on the other.
func primaryMinority(p *partitionRig) {
	old, replica, sentinel := p.set.Primary(), p.set.Replicas()[0], p.set.Sentinels()[0]
	p.net.Partition([]*testenv.NetNode{old.NetNode(), replica.NetNode(), sentinel.NetNode()}, p.others(old, replica, sentinel))
	p.waitPromoted(old)
}

// serveCutOff: one instance cut from every Redis process for 6s (its
// consumer's heartbeat expires; the other takes over its entries).
func serveCutOff(p *partitionRig) {
	p.net.Isolate(p.serves[0])
	time.Sleep(6 * time.Second)
	p.net.Heal()
}

func (p *partitionRig) waitPromoted(old *testenv.RedisServer) {
	promoted := p.set.WaitPromoted(p.t, old.Addr(), 60*time.Second)
	time.Sleep(time.Second) // the old primary goes on a while
	p.net.Heal()
	p.t.Logf("%s promoted; healed", promoted)
	p.set.WaitFailover(p.t, old.Addr(), 60*time.Second)
	p.set.WaitReplicaSync(p.t)
}

// partitionFigures is what a partition test counts.
type partitionFigures struct {
	accepted, lost, oversold, duplicates, deadLetters int
	answered, requests                                int // during the nemesis
}

func (f partitionFigures) String() string {
	return fmt.Sprintf("accepted %d, accepted-and-lost %d, oversold %d, duplicate buyers %d, dead letters %d, answered during the nemesis %d/%d (%.0f%%)",
		f.accepted, f.lost, f.oversold, f.duplicates, f.deadLetters, f.answered, f.requests, 100*float64(f.answered)/math.Max(1, float64(f.requests)))
}

// runPartition runs the sale under the nemesis in mode m and returns its
// figures, asserting them when the mode promises.
func runPartition(t *testing.T, m partitionMode, strike nemesis) partitionFigures {
	p := newPartitionRig(t, m)
	p.checkStartLogs(m)
	s := &sale{accepted: map[int64]int64{}, named: map[int64]int64{}, codes: map[string]int{}}
	l := &pacedLoad{rig: p.saleRig, s: s, targets: p.urls}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.run(ctx, userRange(1, partitionUsers)) }()
	for l.acceptedN() < partitionStock/4 {
		select {
		case <-done:
			t.Fatalf("the sale ended before the nemesis: %d accepted", l.acceptedN())
		case <-time.After(20 * time.Millisecond):
		}
	}
	l.during.Store(true)
	strike(p)
	l.during.Store(false)
	stop()
	<-done
	for range 5 { // buyers whose clicks met the fault try again
		before := s.codes[flashsale.EUnavailable] + s.failures
		p.buy(s, userRange(1, partitionUsers), func() []string { return p.urls }, math.MaxInt, nil)
		if s.codes[flashsale.EUnavailable]+s.failures == before {
			break
		}
	}
	f := p.count(s)
	f.answered, f.requests = int(l.answered.Load()), int(l.requests.Load())
	t.Logf("%s: %v; refusals %v, transport errors %d", t.Name(), f, s.codes, s.failures)
	if m.promise && (f.lost != 0 || f.oversold != 0 || f.duplicates != 0) {
		t.Errorf("durability %s promises no accepted order lost, none oversold, no buyer twice: %v", m.name, f)
	}
	return f
}

// checkStartLogs checks that every instance logged at start what mode m
// says about partitions.
func (p *partitionRig) checkStartLogs(m partitionMode) {
	for _, name := range p.logs {
		if out, err := os.ReadFile(name); err != nil || !strings.Contains(string(out), m.logs) {
			p.t.Errorf("serve --durability %s did not log %q at start (%v):\n%s", m.name, m.logs, err, out)
		}
	}
}

// count drains the pipeline and counts the outcome.
func (p *partitionRig) count(s *sale) partitionFigures {
	t := p.t
	ctx := context.Background()
	db, err := store.Open(ctx, p.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := lab.NewAuditor(db, p.redis, p.prefix).Drain(ctx, p.voucher, 120*time.Second); err != nil {
		t.Errorf("drain: %v", err)
	}
	a, err := db.AuditVoucher(ctx, p.voucher)
	if err != nil {
		t.Fatal(err)
	}
	f := partitionFigures{accepted: len(s.accepted), oversold: max(0, a.Orders-partitionStock, -a.Remaining), duplicates: a.DuplicateBuyers}
	told := map[int64]int{}
	for _, u := range s.accepted {
		told[u]++
	}
	for _, n := range told {
		if n > 1 {
			f.duplicates++
		}
	}
	missing := map[int64]bool{}
	for _, m := range []map[int64]int64{s.accepted, s.named} {
		for id := range m {
			if o, err := db.FindOrder(ctx, id); flashsale.ErrorCode(err) == flashsale.ENotFound || (err == nil && o.Status != flashsale.StatusCreated) {
				missing[id] = true
			}
		}
	}
	f.lost = len(missing)
	if st, err := async.ReadState(ctx, p.redis, p.prefix, p.voucher); err == nil {
		f.deadLetters = st.DeadLetters
	}
	t.Logf("MySQL %+v", a)
	return f
}

// pacedLoad is buyers at a steady pace: 16 at a time, each clicking once
// every 40ms, counting what was answered while during is set (an order
// taken, or refused for a reason: not a 5xx, not a transport error).
type pacedLoad struct {
	rig                *saleRig
	s                  *sale
	targets            []string
	during             atomic.Bool
	requests, answered atomic.Int64
}

func (l *pacedLoad) acceptedN() int { l.s.mu.Lock(); defer l.s.mu.Unlock(); return len(l.s.accepted) }

// run sends one click per user until the users run out or ctx ends.
func (l *pacedLoad) run(ctx context.Context, users []int64) {
	jobs := make(chan int64)
	var wg sync.WaitGroup
	var seq atomic.Int64
	for range 16 {
		wg.Go(func() {
			for u := range jobs {
				tok, err := l.rig.auth.UserToken(u, time.Hour)
				if err != nil {
					l.rig.t.Error(err)
					return
				}
				during := l.during.Load()
				status := l.rig.click(l.s, u, tok, l.targets[int(seq.Add(1))%len(l.targets)])
				if during {
					l.requests.Add(1)
					if status != 0 && status < 500 {
						l.answered.Add(1)
					}
				}
				time.Sleep(40 * time.Millisecond)
			}
		})
	}
	defer func() { close(jobs); wg.Wait() }()
	for _, u := range users {
		select {
		case jobs <- u:
		case <-ctx.Done():
			return
		}
	}
}

func partitionTest(t *testing.T, strike nemesis, modes ...partitionMode) {
	t.Parallel()
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			if !m.promise {
				testenv.SkipUnlessPartitionFigures(t) // TestPartitionStartLogs checks its start
			}
			runPartition(t, m, strike)
		})
	}
}

// TestPartitionStartLogs: what a mode that promises nothing under
// partitions asserts besides its figures, what serve logs at start about
// them, checked without a sale when the figures are not gathered.
func TestPartitionStartLogs(t *testing.T) {
	if testenv.PartitionFigures() {
		t.Skip("the runs of the figures check it")
	}
	t.Parallel()
	for _, m := range partitionModes {
		if !m.promise && m.logs != "" {
			t.Run(m.name, func(t *testing.T) { newPartitionRig(t, m).checkStartLogs(m) })
		}
	}
}

// TestPartitionPrimaryIsolated: nemesis (a).
func TestPartitionPrimaryIsolated(t *testing.T) { partitionTest(t, primaryIsolated, partitionModes...) }

// TestPartitionPrimaryMinority: nemesis (b).
func TestPartitionPrimaryMinority(t *testing.T) { partitionTest(t, primaryMinority, partitionModes...) }

// TestPartitionServeCutOff: nemesis (c).
func TestPartitionServeCutOff(t *testing.T) { partitionTest(t, serveCutOff, partitionModes...) }

// primaryWithInstances: the primary and both instances (their consumers)
// cut from the Sentinels and the replicas, until a replica is promoted
// and 3s more. The buyers still reach every instance: the old primary
// takes their orders (answered 503: the replicas do not acknowledge them)
// and the consumers read them there, the window docs/partitions.md names.
func primaryWithInstances(p *partitionRig) {
	old := p.set.Primary()
	p.net.Partition(append([]*testenv.NetNode{old.NetNode()}, p.serves...), p.others(old))
	promoted := p.set.WaitPromoted(p.t, old.Addr(), 60*time.Second)
	time.Sleep(3 * time.Second)
	p.net.Heal()
	p.t.Logf("%s promoted; healed", promoted)
	p.set.WaitFailover(p.t, old.Addr(), 60*time.Second)
	p.set.WaitReplicaSync(p.t)
}

// partitionWideWindow is the shipped configuration with a primary that
// goes on writing for 30s once cut off from its replicas: the window
// before min-replicas-max-lag stops it, made wider than the partition.
var partitionWideWindow = partitionMode{name: "replica-all-lag30", args: []string{"--durability", "replica", "--min-replicas", "2"},
	opts:    []testenv.ServerOption{testenv.WithConfig("min-replicas-to-write", "2"), testenv.WithConfig("min-replicas-max-lag", "30")},
	promise: true, logs: "a network partition loses no accepted order"}

// TestPartitionPrimaryWithInstances: nemesis (a) with the instances on the
// old primary's side, in the shipped configuration and with its window
// widened.
func TestPartitionPrimaryWithInstances(t *testing.T) {
	partitionTest(t, primaryWithInstances, partitionModes[3], partitionWideWindow)
}
