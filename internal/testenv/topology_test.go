package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

func TestMain(m *testing.M) { os.Exit(RunMain(m)) }

// A write on the primary, replicated, survives a SIGKILL of the primary:
// the Sentinels promote the replica, and clients built from URL and from
// ClientOption read it there.
func TestSentinelFailover(t *testing.T) {
	begin := time.Now()
	s := StartSentinelSet(t, WithAOF())
	t.Logf("StartSentinelSet took %v", time.Since(begin))
	ctx := context.Background()
	opt, err := rueidis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", s.URL(), err)
	}
	if opt.Sentinel.MasterSet != s.MasterName() || len(opt.InitAddress) != 3 {
		t.Fatalf("ParseURL(%q) = %+v", s.URL(), opt)
	}
	opt.DisableCache = true
	fromURL := newClient(t, opt)
	if err := fromURL.Do(ctx, fromURL.B().Set().Key("k").Value("before failover").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	old := s.Primary()
	if r := s.Replica(); r == old {
		t.Fatal("Replica() is the primary")
	}
	s.WaitReplicaSync(t)
	start := time.Now()
	if killed := s.KillPrimary(); killed != old || killed.Running() {
		t.Fatalf("KillPrimary killed %s (running %v), primary was %s", killed.Addr(), killed.Running(), old.Addr())
	}
	primary := s.WaitFailover(t, old.Addr(), 30*time.Second)
	t.Logf("failover took %v", time.Since(start))
	if primary == old.Addr() || s.Primary().Addr() != primary {
		t.Fatalf("new primary %s, old %s, Primary() %s", primary, old.Addr(), s.Primary().Addr())
	}
	for name, c := range map[string]rueidis.Client{"URL": fromURL, "ClientOption": s.Client(t)} {
		readCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		got, err := c.Do(readCtx, c.B().Get().Key("k").Build()).ToString()
		cancel()
		if err != nil || got != "before failover" {
			t.Fatalf("client from %s after failover: GET k = %q, %v", name, got, err)
		}
	}
	// The old primary comes back as a replica of the new one.
	begin = time.Now()
	old.Start()
	defer func() { t.Logf("the old primary rejoined as a replica in %v", time.Since(begin)) }()
	waitFor(t, 30*time.Second, "the old primary to rejoin as replica", func(ctx context.Context) error {
		repl, err := old.info(ctx, "replication")
		if err != nil {
			return err
		}
		if repl["role"] != "slave" || old.Addr() == primary || repl["master_link_status"] != "up" {
			return fmt.Errorf("old primary: role %s link %s", repl["role"], repl["master_link_status"])
		}
		return nil
	}, s.logs)
}

// Slot agrees with the server's CLUSTER KEYSLOT, hash tags included.
func TestSlot(t *testing.T) {
	c := SharedCluster(t)
	n := c.Masters()[0]
	for _, key := range []string{"", "a", "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "{}x", "flashsale:{v42}:stock", "\xff\x00"} {
		want, err := n.doT(t, "CLUSTER", "KEYSLOT", key).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if got := Slot(key); got != int(want) {
			t.Errorf("Slot(%q) = %d, server says %d", key, got, want)
		}
	}
}

// The shared cluster covers every slot and serves keys in many slots
// through a client from URL.
func TestClusterServesAllSlots(t *testing.T) {
	c := SharedCluster(t)
	if len(c.Masters()) != 3 || len(c.Addrs()) != 3 || len(c.Nodes()) != 6 {
		t.Fatalf("%d masters, %d nodes", len(c.Masters()), len(c.Nodes()))
	}
	covered := 0
	for _, r := range c.slotRanges(t) {
		covered += r.to - r.from + 1
	}
	if covered != 16384 {
		t.Fatalf("%d slots covered", covered)
	}
	opt, err := rueidis.ParseURL(c.URL())
	if err != nil || len(opt.InitAddress) != 3 {
		t.Fatalf("ParseURL(%q) = %v, %v", c.URL(), opt.InitAddress, err)
	}
	client := newClient(t, opt)
	if _, ok := client.Nodes()[c.Addrs()[1]]; !ok || len(client.Nodes()) < 3 {
		t.Fatalf("client from URL is not a cluster client: nodes %v", client.Nodes())
	}
	ctx := context.Background()
	prefix := "test:" + Unique() + ":"
	slots := map[int]bool{}
	for i := range 500 {
		key := prefix + strconv.Itoa(i)
		slots[Slot(key)] = true
		if err := client.Do(ctx, client.B().Set().Key(key).Value(strconv.Itoa(i)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Masters() {
		n, err := m.doT(t, "DBSIZE").AsInt64()
		if err != nil || n == 0 {
			t.Fatalf("master %s holds %d keys (%v): the keys are not spread", m.Addr(), n, err)
		}
	}
	for i := range 500 {
		key := prefix + strconv.Itoa(i)
		got, err := client.Do(ctx, client.B().Get().Key(key).Build()).ToString()
		if err != nil || got != strconv.Itoa(i) {
			t.Fatalf("GET %s = %q, %v", key, got, err)
		}
	}
	if len(slots) < 400 {
		t.Fatalf("500 keys in only %d slots", len(slots))
	}
}

// A slot migrates while a goroutine keeps writing to it: no acknowledged
// write is lost, and the slot's keys are served by the new owner.
func TestClusterMigrateSlotUnderWrites(t *testing.T) {
	begin := time.Now()
	c := StartCluster(t, WithoutReplicas())
	t.Logf("StartCluster(WithoutReplicas) took %v", time.Since(begin))
	client := c.Client(t)
	ctx := context.Background()
	tag := "{test:" + Unique() + "}"
	slot := Slot(tag)
	// Keys to move before the writer starts.
	for i := range 1000 {
		if err := client.Do(ctx, client.B().Set().Key(tag+":pre:"+strconv.Itoa(i)).Value("x").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	from := c.MasterOf(slot)
	var to *RedisServer
	for _, m := range c.Masters() {
		if m != from {
			to = m
		}
	}
	var acked atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cmds := rueidis.Commands{
				client.B().Incr().Key(tag + ":counter").Build(),
				client.B().Set().Key(tag + ":w:" + strconv.Itoa(i)).Value(strconv.Itoa(i)).Build(),
			}
			for _, r := range client.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					errs <- fmt.Errorf("write %d: %w", i, err)
					return
				}
			}
			acked.Add(1)
		}
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	c.MigrateSlot(t, slot, to)
	t.Logf("migrating 1000+ keys took %v", time.Since(start))
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	n := acked.Load()
	if n == 0 {
		t.Fatal("no write was acknowledged")
	}
	if got := c.MasterOf(slot); got != to {
		t.Fatalf("slot %d on %s after migrating to %s", slot, got.Addr(), to.Addr())
	}
	// Read straight from the new owner: no redirection can hide a key.
	direct := to.Client(t)
	counter, err := direct.Do(ctx, direct.B().Get().Key(tag+":counter").Build()).AsInt64()
	if err != nil || counter != n {
		t.Fatalf("counter on the new owner = %d, %v; %d increments acknowledged", counter, err, n)
	}
	for i := range n {
		if err := direct.Do(ctx, direct.B().Get().Key(tag+":w:"+strconv.Itoa(int(i))).Build()).Error(); err != nil {
			t.Fatalf("write %d of %d missing on the new owner: %v", i, n, err)
		}
	}
	want := 1000 + 1 + n
	if got, err := to.doT(t, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)).AsInt64(); err != nil || got != want {
		t.Fatalf("new owner has %d keys in slot %d, want %d (%v)", got, slot, want, err)
	}
	if got, _ := from.doT(t, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)).AsInt64(); got != 0 {
		t.Fatalf("old owner still has %d keys in slot %d", got, slot)
	}
	t.Logf("%d writes acknowledged during the migration", n)
}

// A killed master's replica takes over its slots and the slot is served
// again; the killed node, restarted, rejoins and the cluster is healthy.
func TestClusterKillMasterFailover(t *testing.T) {
	c := SharedCluster(t)
	client := c.Client(t)
	ctx := context.Background()
	key := "test:" + Unique()
	slot := Slot(key)
	if err := client.Do(ctx, client.B().Set().Key(key).Value("v").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// The replica must have the key before its master dies.
	old := c.MasterOf(slot)
	if err := old.do(ctx, "WAIT", "1", "5000").Error(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if killed := c.KillMasterOf(t, slot); killed != old {
		t.Fatalf("killed %s, master was %s", killed.Addr(), old.Addr())
	}
	owner := c.WaitFailover(t, slot, 30*time.Second)
	t.Logf("cluster failover took %v", time.Since(start))
	if owner == old {
		t.Fatal("the killed master still owns the slot")
	}
	readCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	got, err := client.Do(readCtx, client.B().Get().Key(key).Build()).ToString()
	if err != nil || got != "v" {
		t.Fatalf("GET %s after failover = %q, %v", key, got, err)
	}
	if err := client.Do(readCtx, client.B().Set().Key(key).Value("w").Build()).Error(); err != nil {
		t.Fatalf("SET after failover: %v", err)
	}
	old.Start()
	c.waitHealthy(t, 30*time.Second)
}

// After a test leaves a node of the shared cluster dead, the next test
// gets a healthy cluster.
func TestSharedClusterHealsAfterKill(t *testing.T) {
	c := SharedCluster(t)
	c.KillMasterOf(t, 0)
	c2 := SharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c2.healthy(ctx); err != nil {
		t.Fatalf("SharedCluster after a kill: %v", err)
	}
}

// DeletePrefix finds a prefix's keys on every master of a cluster, not
// only on the node a keyless SCAN happens to reach, and leaves other keys.
func TestDeletePrefixOnCluster(t *testing.T) {
	c := SharedCluster(t)
	rc := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix, other := "test:"+Unique()+":", "test:"+Unique()+":"
	masters := map[*RedisServer]bool{}
	for i := range 300 {
		for _, p := range []string{prefix, other} {
			k := p + "{k" + strconv.Itoa(i) + "}"
			masters[c.MasterOf(Slot(k))] = true
			if err := rc.Do(ctx, rc.B().Set().Key(k).Value("v").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(masters) != 3 {
		t.Fatalf("the keys are on %d masters; want all 3", len(masters))
	}
	if err := DeletePrefix(ctx, rc, prefix); err != nil {
		t.Fatal(err)
	}
	count := func(p string) int {
		n := 0
		for i := range 300 {
			k := p + "{k" + strconv.Itoa(i) + "}"
			if rc.Do(ctx, rc.B().Get().Key(k).Build()).Error() == nil {
				n++
			}
		}
		return n
	}
	if n := count(prefix); n != 0 {
		t.Errorf("%d keys of the prefix left after DeletePrefix", n)
	}
	if n := count(other); n != 300 {
		t.Errorf("%d of 300 keys of another prefix left; want all", n)
	}
	if err := DeletePrefix(ctx, rc, other); err != nil {
		t.Fatal(err)
	}
}
