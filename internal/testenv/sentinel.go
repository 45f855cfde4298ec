package testenv

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// SentinelSet is a private primary, its replicas and three Sentinels
// watching them (quorum 2), owned by one test: every process is killed
// when the test ends.
type SentinelSet struct {
	name      string
	nodes     []*RedisServer // the data nodes; which is primary changes
	sentinels [3]*RedisServer
	net       *Net // nil: on 127.0.0.1
}

// Sentinel timings: fast enough for tests, slow enough that a loaded
// machine does not see a healthy primary as down. A set on a Net (the
// partition tests) is faster: its tests wait for failovers they cause.
const (
	sentinelDownAfter       = "2000"
	sentinelFailoverTimeout = "5000"
	netDownAfter            = "1500"
	netFailoverTimeout      = "4000"
)

// sentinelDebug shortens two of Sentinel's fixed periods (Redis 7.0's
// SENTINEL DEBUG, lost at a restart, so sent after each start): INFO to
// the nodes every 1s instead of 10s, so a restarted old primary is told to
// become a replica within a second or two, not ten; hello messages every
// 0.5s instead of 2s, so the Sentinels find each other sooner.
var sentinelDebug = []string{"SENTINEL", "DEBUG", "INFO-PERIOD", "1000", "PUBLISH-PERIOD", "500"}

// StartSentinelSet starts a primary, a replica of it and three Sentinels
// monitoring it under a unique master name (the primary is down after 2s
// unanswered), and waits until every Sentinel knows the replica and the
// other Sentinels (a failover is possible) and the replica has finished
// its first sync. opts apply to both data nodes.
func StartSentinelSet(t testing.TB, opts ...ServerOption) *SentinelSet {
	t.Helper()
	return startSentinelSet(t, nil, 1, opts)
}

// StartNetSentinelSet is StartSentinelSet with that many replicas and
// every process in a namespace of its own on n (nodes redis0, redis1…,
// sentinel0…; redis on port 6379, Sentinels on 26379), down after 1.5s.
func StartNetSentinelSet(t testing.TB, n *Net, replicas int, opts ...ServerOption) *SentinelSet {
	t.Helper()
	return startSentinelSet(t, n, replicas, opts)
}

func startSentinelSet(t testing.TB, n *Net, replicas int, opts []ServerOption) *SentinelSet {
	t.Helper()
	// The wait for the sync matters: a replica in its first sync (which
	// takes a moment even with repl-diskless-sync-delay 0) reports
	// master_link_down_since_seconds:-1, which Sentinel (7.0) takes as a
	// healthy link, so a primary killed then is replaced by an empty
	// replica.
	s := &SentinelSet{name: "fs-" + Unique(), net: n}
	downAfter, failoverTimeout := sentinelDownAfter, sentinelFailoverTimeout
	if n != nil {
		downAfter, failoverTimeout = netDownAfter, netFailoverTimeout
	}
	for i := range 1 + replicas {
		nn, port, base := s.place(t, fmt.Sprintf("redis%d", i), 6379)
		if i > 0 {
			base = append(base, WithConfig("replicaof", s.nodes[0].host+" "+strconv.Itoa(s.nodes[0].port)))
		}
		node := newRedisServer(t, t.TempDir(), base, []int{port}, opts)
		node.place(nn)
		s.nodes = append(s.nodes, node)
		t.Cleanup(node.kill)
		node.Start()
	}
	for i := range s.sentinels {
		nn, port, _ := s.place(t, fmt.Sprintf("sentinel%d", i), 26379)
		dir := t.TempDir()
		var c serverConfig
		c.set("port", fmt.Sprint(port))
		c.set("bind", cmp.Or(nn.ip(), "127.0.0.1"))
		c.set("dir", dir)
		c.set("logfile", filepath.Join(dir, "redis.log"))
		if nn != nil {
			netServerOptions(nn)[1](&c)
		}
		c.set("sentinel monitor", fmt.Sprintf("%s %s 2", s.name, strings.Replace(s.nodes[0].Addr(), ":", " ", 1)))
		c.set("sentinel down-after-milliseconds", s.name+" "+downAfter)
		c.set("sentinel failover-timeout", s.name+" "+failoverTimeout)
		c.set("sentinel parallel-syncs", s.name+" 1")
		s.sentinels[i] = newServer(t, dir, port, "sentinel.conf", c, []string{"--sentinel"})
		s.sentinels[i].setup = [][]string{sentinelDebug}
		s.sentinels[i].place(nn)
		t.Cleanup(s.sentinels[i].kill)
		s.sentinels[i].Start()
	}
	s.waitDiscovered(t)
	s.WaitReplicaSync(t)
	return s
}

// place returns where a process of the set runs: on 127.0.0.1 on a free
// port, or in a new namespace of the set's Net on port.
func (s *SentinelSet) place(t testing.TB, name string, port int) (*NetNode, int, []ServerOption) {
	if s.net == nil {
		return nil, redisPort(t), nil
	}
	nn := s.net.Node(name)
	return nn, port, netServerOptions(nn)
}

// place moves the server, not started, into the namespace nn (nil: none).
func (s *RedisServer) place(nn *NetNode) {
	if nn != nil {
		s.nn, s.host = nn, nn.IP
	}
}

// waitDiscovered waits until every Sentinel sees the replica and the two
// other Sentinels (they find each other through the primary, every 2s).
func (s *SentinelSet) waitDiscovered(t testing.TB) {
	t.Helper()
	waitFor(t, startTimeout, "the Sentinels to discover the replica and each other", func(ctx context.Context) error {
		for _, sn := range s.sentinels {
			m, err := sn.do(ctx, "SENTINEL", "MASTER", s.name).AsStrMap()
			if err != nil {
				return fmt.Errorf("%s: %w", sn.Addr(), err)
			}
			if m["num-slaves"] != strconv.Itoa(len(s.nodes)-1) || m["num-other-sentinels"] != "2" {
				return fmt.Errorf("%s sees %s replicas and %s other sentinels", sn.Addr(), m["num-slaves"], m["num-other-sentinels"])
			}
		}
		return nil
	}, s.logs)
}

// MasterName returns the name the Sentinels monitor the primary under.
func (s *SentinelSet) MasterName() string { return s.name }

// SentinelAddrs returns the Sentinels' addresses.
func (s *SentinelSet) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		addrs[i] = sn.Addr()
	}
	return addrs
}

// Sentinels returns the Sentinel processes (to kill one, say).
func (s *SentinelSet) Sentinels() []*RedisServer { return s.sentinels[:] }

// URL returns the set in the form rueidis.ParseURL reads as Sentinel:
// redis://sentinel1/0?addr=sentinel2&addr=sentinel3&master_set=NAME.
func (s *SentinelSet) URL() string {
	q := url.Values{}
	for _, a := range s.SentinelAddrs()[1:] {
		q.Add("addr", a)
	}
	q.Set("master_set", s.name)
	return "redis://" + s.sentinels[0].Addr() + "/0?" + q.Encode()
}

// ClientOption returns client options that find the primary through the
// Sentinels, without client-side caching.
func (s *SentinelSet) ClientOption() rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:  s.SentinelAddrs(),
		Sentinel:     rueidis.SentinelOption{MasterSet: s.name},
		DisableCache: true,
	}
}

// Client returns a Sentinel client of the set, closed when the test ends.
func (s *SentinelSet) Client(t testing.TB) rueidis.Client {
	t.Helper()
	return newClient(t, s.ClientOption())
}

// Primary returns the data node the Sentinels report as primary (the
// first Sentinel that answers decides).
func (s *SentinelSet) Primary() *RedisServer {
	t := *s.nodes[0].owner.Load()
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	for _, sn := range s.sentinels {
		var addr string
		if addr, err = s.reportedPrimary(ctx, sn); err == nil {
			return s.node(t, addr)
		}
	}
	t.Fatalf("testenv: no Sentinel reports a primary: %v", err)
	return nil
}

// Replica returns a data node that is not the primary (the first).
func (s *SentinelSet) Replica() *RedisServer { return s.Replicas()[0] }

// Replicas returns the data nodes that are not the primary.
func (s *SentinelSet) Replicas() []*RedisServer {
	p := s.Primary()
	var rs []*RedisServer
	for _, n := range s.nodes {
		if n != p {
			rs = append(rs, n)
		}
	}
	return rs
}

// KillPrimary kills the current primary with SIGKILL and returns it; Start
// brings it back, and the Sentinels make it a replica of the new primary.
func (s *SentinelSet) KillPrimary() *RedisServer {
	p := s.Primary()
	p.Kill()
	return p
}

// WaitFailover waits until every Sentinel that answers reports a primary
// other than old (an address) and that node answers ROLE as master;
// it returns the new primary's address.
func (s *SentinelSet) WaitFailover(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	var primary string
	waitFor(t, timeout, "a Sentinel failover away from "+old, func(ctx context.Context) error {
		primary = ""
		for _, sn := range s.sentinels {
			addr, err := s.reportedPrimary(ctx, sn)
			if err != nil {
				continue // a Sentinel the test has killed
			}
			if addr == old {
				return fmt.Errorf("%s still reports %s", sn.Addr(), old)
			}
			if err := linkedToPrimary(ctx, sn, s.name); err != nil {
				return err
			}
			if primary != "" && addr != primary {
				return fmt.Errorf("Sentinels disagree: %s and %s", primary, addr)
			}
			primary = addr
		}
		if primary == "" {
			return fmt.Errorf("no Sentinel answers")
		}
		role, err := s.node(t, primary).do(ctx, "ROLE").ToArray()
		if err != nil {
			return err
		}
		if r, _ := role[0].ToString(); r != "master" {
			return fmt.Errorf("%s is %s", primary, r)
		}
		return nil
	}, s.logs)
	return primary
}

// WaitPromoted waits until a majority of the Sentinels (two) report a
// primary other than old and that node answers ROLE as master, as during
// a partition that leaves a Sentinel with the old primary; it returns the
// new primary's address.
func (s *SentinelSet) WaitPromoted(t testing.TB, old string, timeout time.Duration) string {
	t.Helper()
	var primary string
	waitFor(t, timeout, "a majority of Sentinels to promote a replica instead of "+old, func(ctx context.Context) error {
		votes := map[string]int{}
		for _, sn := range s.sentinels {
			if addr, err := s.reportedPrimary(ctx, sn); err == nil && addr != old {
				votes[addr]++
			}
		}
		primary = ""
		for addr, n := range votes {
			if n >= 2 {
				primary = addr
			}
		}
		if primary == "" {
			return fmt.Errorf("reported instead of %s: %v", old, votes)
		}
		role, err := s.node(t, primary).do(ctx, "ROLE").ToArray()
		if err != nil {
			return err
		}
		if r, _ := role[0].ToString(); r != "master" {
			return fmt.Errorf("%s is %s", primary, r)
		}
		return nil
	}, s.logs)
	return primary
}

// WaitReplicaSync waits until every replica is connected to the primary
// and has everything the primary had written when it was called.
func (s *SentinelSet) WaitReplicaSync(t testing.TB) {
	t.Helper()
	p := s.Primary()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	pi, err := p.info(ctx, "replication")
	cancel()
	if err != nil {
		t.Fatalf("testenv: INFO replication on the primary %s: %v", p.Addr(), err)
	}
	want, _ := strconv.ParseInt(pi["master_repl_offset"], 10, 64)
	for _, r := range s.Replicas() {
		waitFor(t, startTimeout, "the replica to catch up", func(ctx context.Context) error {
			ri, err := r.info(ctx, "replication")
			if err != nil {
				return err
			}
			if ri["master_link_status"] != "up" || ri["master_host"]+":"+ri["master_port"] != p.Addr() {
				return fmt.Errorf("%s: link to %s:%s %s", r.Addr(), ri["master_host"], ri["master_port"], ri["master_link_status"])
			}
			got, _ := strconv.ParseInt(ri["slave_repl_offset"], 10, 64)
			if got < want {
				return fmt.Errorf("%s at offset %d, primary at %d", r.Addr(), got, want)
			}
			return nil
		}, s.logs)
	}
}

// linkedToPrimary reports whether the Sentinel sn has a live link to the
// primary it reports under name: flagged plain master (not down), no PING
// waiting for its answer, and an INFO reply saying master. A Sentinel
// that has just switched has none of these yet; a node restarted then
// (the old primary, back as a would-be replica) gives it a candidate for
// a second failover should the new primary miss PINGs a while on a
// loaded machine, and that failover promotes the restarted node.
func linkedToPrimary(ctx context.Context, sn *RedisServer, name string) error {
	m, err := sn.do(ctx, "SENTINEL", "MASTER", name).AsStrMap()
	if err != nil {
		return fmt.Errorf("%s: %w", sn.Addr(), err)
	}
	if m["flags"] != "master" || m["last-ping-sent"] != "0" || m["info-refresh"] == "0" || m["role-reported"] != "master" {
		return fmt.Errorf("%s: no live link to the new primary yet: flags %s, ping pending %sms, INFO %sms ago, role %s",
			sn.Addr(), m["flags"], m["last-ping-sent"], m["info-refresh"], m["role-reported"])
	}
	return nil
}

// reportedPrimary asks one Sentinel for the primary's address.
func (s *SentinelSet) reportedPrimary(ctx context.Context, sn *RedisServer) (string, error) {
	hp, err := sn.do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.name).AsStrSlice()
	if err != nil {
		return "", err
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("%s: GET-MASTER-ADDR-BY-NAME: %v", sn.Addr(), hp)
	}
	return hp[0] + ":" + hp[1], nil
}

// node returns the data node at addr.
func (s *SentinelSet) node(t testing.TB, addr string) *RedisServer {
	t.Helper()
	for _, n := range s.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	t.Fatalf("testenv: the Sentinels report %s, which is not a node of the set", addr)
	return nil
}

// logs returns the log tails of every process of the set.
func (s *SentinelSet) logs() string {
	var b strings.Builder
	for _, n := range append(slices.Clone(s.nodes), s.sentinels[:]...) {
		b.WriteString(n.LogTail(15))
	}
	return b.String()
}
