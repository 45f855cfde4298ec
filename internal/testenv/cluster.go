package testenv

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Cluster is a private Redis Cluster: three masters (WithMasters: more)
// covering the 16384 slots, each with one replica unless WithoutReplicas. A node is
// unreachable (and its replica takes over) 1s after it stops answering.
type Cluster struct {
	nodes []*RedisServer
}

// ClusterOption changes how StartCluster builds the cluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	replicas bool
	masters  int
	node     []ServerOption
}

// WithMasters starts n masters (at least 3; default 3), splitting the
// slots evenly among them.
func WithMasters(n int) ClusterOption {
	return func(c *clusterConfig) { c.masters = max(n, clusterMasters) }
}

// WithoutReplicas starts three masters only: a killed master's slots stay
// down until it is started again.
func WithoutReplicas() ClusterOption {
	return func(c *clusterConfig) { c.replicas = false }
}

// WithNodeConfig applies server options (WithAOF, WithConfig) to every node.
func WithNodeConfig(opts ...ServerOption) ClusterOption {
	return func(c *clusterConfig) { c.node = append(c.node, opts...) }
}

// clusterMasters is the number of masters StartCluster creates.
const clusterMasters = 3

// StartCluster starts the nodes, joins them with redis-cli --cluster
// create and waits until every node reports cluster_state:ok with all
// slots covered and knows every other node. The nodes are killed when the
// test ends.
func StartCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	return startCluster(t, t.TempDir, func(n *RedisServer) { t.Cleanup(n.kill) }, opts)
}

// startCluster starts a cluster whose node directories come from tempDir;
// track is given each node before it starts, to kill it later, also if
// starting the cluster fails.
func startCluster(t testing.TB, tempDir func() string, track func(*RedisServer), opts []ClusterOption) *Cluster {
	t.Helper()
	cfg := clusterConfig{replicas: true, masters: clusterMasters}
	for _, o := range opts {
		o(&cfg)
	}
	n := cfg.masters
	if cfg.replicas {
		n *= 2
	}
	c := &Cluster{}
	for range n {
		dataPort, busPort := redisPort(t), redisPort(t)
		base := []ServerOption{
			WithConfig("cluster-enabled", "yes"),
			WithConfig("cluster-config-file", "nodes.conf"),
			WithConfig("cluster-node-timeout", "1000"),
			// The bus port is not data port + 10000, which may be above
			// 65535 or taken.
			WithConfig("cluster-port", strconv.Itoa(busPort)),
			// A replica whose master died takes over however long ago it
			// last heard from it: tests kill masters at any moment.
			WithConfig("cluster-replica-validity-factor", "0"),
		}
		node := newRedisServer(t, tempDir(), base, []int{dataPort}, cfg.node)
		track(node)
		c.nodes = append(c.nodes, node)
	}
	for _, node := range c.nodes {
		node.Start()
	}
	args := []string{"--cluster", "create"}
	for _, node := range c.nodes {
		args = append(args, node.Addr())
	}
	args = append(args, "--cluster-replicas", map[bool]string{true: "1", false: "0"}[cfg.replicas], "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("testenv: redis-cli %s: %v\n%s\n%s", strings.Join(args, " "), err, out, c.logs())
	}
	c.waitHealthy(t, startTimeout)
	return c
}

// waitHealthy waits until every node runs, reports cluster_state:ok with
// all slots assigned and knows all nodes, and each replica is linked.
func (c *Cluster) waitHealthy(t testing.TB, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, "the cluster to be healthy", c.healthy, c.logs)
}

// healthy returns why the cluster is not fully healthy, or nil.
func (c *Cluster) healthy(ctx context.Context) error {
	for _, n := range c.nodes {
		if !n.Running() {
			return fmt.Errorf("%s is down", n.Addr())
		}
		if err := n.clusterOK(ctx, len(c.nodes)); err != nil {
			return err
		}
		repl, err := n.info(ctx, "replication")
		if err != nil {
			return err
		}
		if repl["role"] == "slave" && repl["master_link_status"] != "up" {
			return fmt.Errorf("replica %s: link to its master is %s", n.Addr(), repl["master_link_status"])
		}
	}
	return nil
}

// clusterOK checks CLUSTER INFO on one node.
func (s *RedisServer) clusterOK(ctx context.Context, minKnown int) error {
	text, err := s.do(ctx, "CLUSTER", "INFO").ToString()
	if err != nil {
		return fmt.Errorf("%s: %w", s.Addr(), err)
	}
	f := parseFields(text)
	known, _ := strconv.Atoi(f["cluster_known_nodes"])
	if f["cluster_state"] != "ok" || f["cluster_slots_ok"] != "16384" || known < minKnown {
		return fmt.Errorf("%s: cluster_state:%s cluster_slots_ok:%s cluster_known_nodes:%s",
			s.Addr(), f["cluster_state"], f["cluster_slots_ok"], f["cluster_known_nodes"])
	}
	return nil
}

// Nodes returns every node, masters and replicas, in start order.
func (c *Cluster) Nodes() []*RedisServer { return c.nodes }

// Addrs returns the addresses of the current masters, as seeds.
func (c *Cluster) Addrs() []string {
	var addrs []string
	for _, m := range c.Masters() {
		addrs = append(addrs, m.Addr())
	}
	return addrs
}

// URL returns the cluster in the form rueidis.ParseURL reads and NewClient
// runs as a cluster client: redis://seed1?addr=seed2&addr=seed3 (no
// database: a cluster has only 0).
func (c *Cluster) URL() string {
	addrs := c.Addrs()
	u := "redis://" + addrs[0]
	for i, a := range addrs[1:] {
		u += map[bool]string{true: "?", false: "&"}[i == 0] + "addr=" + a
	}
	return u
}

// ClientOption returns cluster client options seeded with every node,
// without client-side caching.
func (c *Cluster) ClientOption() rueidis.ClientOption {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.Addr())
	}
	return rueidis.ClientOption{InitAddress: addrs, DisableCache: true}
}

// Client returns a cluster client, closed when the test ends.
func (c *Cluster) Client(t testing.TB) rueidis.Client {
	t.Helper()
	return newClient(t, c.ClientOption())
}

// Masters returns the nodes that own slots, as the first running node
// that answers sees it.
func (c *Cluster) Masters() []*RedisServer {
	t := c.owner()
	t.Helper()
	var masters []*RedisServer
	seen := map[*RedisServer]bool{}
	for _, r := range c.slotRanges(t) {
		if !seen[r.master] {
			seen[r.master] = true
			masters = append(masters, r.master)
		}
	}
	return masters
}

// MasterOf returns the master owning slot, as the first running node that
// answers sees it.
func (c *Cluster) MasterOf(slot int) *RedisServer {
	t := c.owner()
	t.Helper()
	for _, r := range c.slotRanges(t) {
		if r.from <= slot && slot <= r.to {
			return r.master
		}
	}
	t.Fatalf("testenv: no node owns slot %d", slot)
	return nil
}

// KillMasterOf kills the master owning slot with SIGKILL and returns it.
func (c *Cluster) KillMasterOf(t testing.TB, slot int) *RedisServer {
	t.Helper()
	m := c.MasterOf(slot)
	m.Kill()
	return m
}

// WaitFailover waits until slot is owned, in the view of every running
// node, by one running node that answers ROLE as master, and every running
// node reports cluster_state:ok; it returns that master.
func (c *Cluster) WaitFailover(t testing.TB, slot int, timeout time.Duration) *RedisServer {
	t.Helper()
	var owner *RedisServer
	waitFor(t, timeout, fmt.Sprintf("a master for slot %d", slot), func(ctx context.Context) error {
		owner = nil
		for _, n := range c.nodes {
			if !n.Running() {
				continue
			}
			if err := n.clusterOK(ctx, 0); err != nil {
				return err
			}
			ranges, err := c.slotRangesOf(ctx, n)
			if err != nil {
				return err
			}
			var m *RedisServer
			for _, r := range ranges {
				if r.from <= slot && slot <= r.to {
					m = r.master
				}
			}
			if m == nil || !m.Running() || (owner != nil && m != owner) {
				return fmt.Errorf("%s: slot %d is on %v (others say %v)", n.Addr(), slot, addrOf(m), addrOf(owner))
			}
			owner = m
		}
		role, err := owner.do(ctx, "ROLE").ToArray()
		if err != nil {
			return err
		}
		if r, _ := role[0].ToString(); r != "master" {
			return fmt.Errorf("%s is %s", owner.Addr(), r)
		}
		return nil
	}, c.logs)
	return owner
}

func addrOf(s *RedisServer) string {
	if s == nil {
		return "nobody"
	}
	return s.Addr()
}

// slotRange is one entry of CLUSTER SLOTS.
type slotRange struct {
	from, to int
	master   *RedisServer
}

// slotRanges returns CLUSTER SLOTS of the first running node that answers.
func (c *Cluster) slotRanges(t testing.TB) []slotRange {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		var ranges []slotRange
		if ranges, err = c.slotRangesOf(ctx, n); err == nil {
			return ranges
		}
	}
	t.Fatalf("testenv: no cluster node answers CLUSTER SLOTS: %v\n%s", err, c.logs())
	return nil
}

// slotRangesOf returns CLUSTER SLOTS as node n sees it.
func (c *Cluster) slotRangesOf(ctx context.Context, n *RedisServer) ([]slotRange, error) {
	entries, err := n.do(ctx, "CLUSTER", "SLOTS").ToArray()
	if err != nil {
		return nil, err
	}
	var ranges []slotRange
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("%s: CLUSTER SLOTS entry %v: %v", n.Addr(), e, err)
		}
		from, _ := f[0].AsInt64()
		to, _ := f[1].AsInt64()
		hp, err := f[2].ToArray()
		if err != nil || len(hp) < 2 {
			return nil, fmt.Errorf("%s: CLUSTER SLOTS entry %v: %v", n.Addr(), e, err)
		}
		port, _ := hp[1].AsInt64()
		m := c.byPort(int(port))
		if m == nil {
			return nil, fmt.Errorf("%s: CLUSTER SLOTS names port %d, not a node of the cluster", n.Addr(), port)
		}
		ranges = append(ranges, slotRange{from: int(from), to: int(to), master: m})
	}
	return ranges, nil
}

func (c *Cluster) byPort(port int) *RedisServer {
	for _, n := range c.nodes {
		if n.port == port {
			return n
		}
	}
	return nil
}

// owner is the test the cluster's nodes currently fail.
func (c *Cluster) owner() testing.TB { return *c.nodes[0].owner.Load() }

// logs returns the log tails of every node.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		b.WriteString(n.LogTail(10))
	}
	return b.String()
}

// PrefixedClient returns a cluster client and a key prefix unique to this
// test, as Redis does for the shared server: every key under the prefix is
// deleted (on every node) when the test ends, and the client is closed.
func (c *Cluster) PrefixedClient(t testing.TB) (rueidis.Client, string) {
	t.Helper()
	rc := newClient(t, c.ClientOption())
	prefix := "test:" + Unique() + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := DeletePrefix(ctx, rc, prefix); err != nil {
			t.Errorf("testenv: cleaning cluster keys %s*: %v", prefix, err)
		}
	})
	return rc, prefix
}
