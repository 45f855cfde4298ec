package testenv

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Net is a private IPv4 network of Linux network namespaces owned by one
// test, for partitions: one namespace per node, each with a veth link into
// one bridge that has the address .1 in the test's own namespace (so the
// test, the buyers, reaches every node, and every node the test through
// Forward). Its subnet is 10.213.k.0/24 with k free on the machine; no node
// has a route off it. Partition, Isolate and Heal cut and restore the
// links between nodes; the test itself is never cut. Needs root and ip(8).
//
// Names start with "fst<k>" (the bridge fst<k>, namespaces fst<k>-<node>,
// veths fst<k>v<i>); the bridge's alias is the test binary's PID, so a
// later binary removes what a crashed one left (StartNet, once).
type Net struct {
	t      testing.TB
	k      int
	bridge string

	mu    sync.Mutex
	nodes []*NetNode
	cut   map[[2]*NetNode]bool // both directions of a cut pair
}

// NetNode is one namespace of a Net, with its own address.
type NetNode struct {
	Name string
	IP   string
	ns   string
}

// netSubnet is the /16 the Nets take their /24s from: not used by the
// machines the tests run on (checked when a subnet is claimed).
const netSubnet = "10.213."

// StartNet creates a Net, removed when the test ends (after the processes
// the test started in it: create it before them).
func StartNet(t testing.TB) *Net {
	t.Helper()
	staleOnce.Do(removeStaleNets)
	n := &Net{t: t, cut: map[[2]*NetNode]bool{}}
	for _, k := range rand.Perm(254) {
		k++
		name := "fst" + strconv.Itoa(k)
		if ipCmd("link", "add", name, "type", "bridge") != nil {
			continue // another test (or test binary) has it
		}
		n.k, n.bridge = k, name
		break
	}
	if n.bridge == "" {
		t.Fatalf("testenv: no free fst<k> bridge name (ip link add; are we root?)")
	}
	t.Cleanup(n.remove)
	subnet := fmt.Sprintf("%s%d.0/24", netSubnet, n.k)
	if out, _ := exec.Command("ip", "-4", "route", "show", "to", "match", subnet).Output(); strings.Contains(string(out), netSubnet) {
		t.Fatalf("testenv: the subnet %s is in use on this machine:\n%s", subnet, out)
	}
	n.must("link", "set", n.bridge, "alias", strconv.Itoa(os.Getpid()))
	n.must("addr", "add", n.HostIP()+"/24", "dev", n.bridge)
	n.must("link", "set", n.bridge, "up")
	return n
}

// HostIP returns the test's own address on the Net.
func (n *Net) HostIP() string { return fmt.Sprintf("%s%d.1", netSubnet, n.k) }

// Node adds a namespace to the Net, with a veth link into its bridge.
func (n *Net) Node(name string) *NetNode {
	n.t.Helper()
	n.mu.Lock()
	i := len(n.nodes)
	nd := &NetNode{Name: name, IP: fmt.Sprintf("%s%d.%d", netSubnet, n.k, 10+i), ns: fmt.Sprintf("fst%d-%s", n.k, name)}
	n.nodes = append(n.nodes, nd)
	n.mu.Unlock()
	veth := fmt.Sprintf("fst%dv%d", n.k, i)
	n.must("netns", "add", nd.ns)
	n.must("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", nd.ns)
	n.must("link", "set", veth, "master", n.bridge, "up")
	n.must("-n", nd.ns, "addr", "add", nd.IP+"/24", "dev", "eth0")
	n.must("-n", nd.ns, "link", "set", "eth0", "up")
	n.must("-n", nd.ns, "link", "set", "lo", "up")
	return nd
}

// Command returns cmd to run in the node's namespace (ip netns exec, which
// execs it: the process is the one started). On a nil node it is plain
// exec.Command.
func (nd *NetNode) Command(name string, args ...string) *exec.Cmd {
	if nd == nil {
		return exec.Command(name, args...)
	}
	return exec.Command("ip", append([]string{"netns", "exec", nd.ns, name}, args...)...)
}

// Partition cuts every node of a group from every node of the other
// groups, both ways: packets between them are dropped (a blackhole /32
// route in each namespace), so connections hang rather than fail. Nodes
// in no group keep reaching everyone; so does the test. Cuts add up until
// Heal.
func (n *Net) Partition(groups ...[]*NetNode) {
	n.t.Helper()
	for i, g := range groups {
		for _, o := range groups[i+1:] {
			for _, a := range g {
				for _, b := range o {
					n.cutPair(a, b)
				}
			}
		}
	}
}

// Isolate cuts nd from every other node of the Net (the test still
// reaches it, and it the test).
func (n *Net) Isolate(nd *NetNode) {
	n.t.Helper()
	n.mu.Lock()
	others := append([]*NetNode(nil), n.nodes...)
	n.mu.Unlock()
	for _, o := range others {
		if o != nd {
			n.cutPair(nd, o)
		}
	}
}

// Heal removes every cut.
func (n *Net) Heal() {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for pair := range n.cut {
		n.must("-n", pair[0].ns, "route", "del", "blackhole", pair[1].IP+"/32")
		delete(n.cut, pair)
	}
}

// cutPair drops the traffic between a and b, both ways.
func (n *Net) cutPair(a, b *NetNode) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range [][2]*NetNode{{a, b}, {b, a}} {
		if !n.cut[p] {
			n.must("-n", p[0].ns, "route", "add", "blackhole", p[1].IP+"/32")
			n.cut[p] = true
		}
	}
}

// Forward listens on the test's address on the Net and forwards every
// connection to target (an address of the test's namespace, say MySQL's
// 127.0.0.1:3306), until the test ends; it returns the address to dial.
func (n *Net) Forward(target string) string {
	n.t.Helper()
	ln, err := net.Listen("tcp", n.HostIP()+":0")
	if err != nil {
		n.t.Fatalf("testenv: %v", err)
	}
	var wg sync.WaitGroup
	n.t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go forward(c, target)
		}
	})
	return ln.Addr().String()
}

// forward copies between c and a new connection to target until either
// side closes.
func forward(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); done <- struct{}{} }()
	<-done
}

// remove deletes the namespaces (killing what still runs in them) and the
// bridge; the veths go with the namespaces.
func (n *Net) remove() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, nd := range n.nodes {
		removeNamespace(nd.ns)
	}
	_ = ipCmd("link", "del", n.bridge)
}

// removeNamespace kills every process in the namespace and deletes it.
func removeNamespace(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	_ = ipCmd("netns", "del", ns)
}

var staleOnce sync.Once

// removeStaleNets removes the bridges whose test binary (the PID in their
// alias) is gone, and every fst namespace without a live bridge.
func removeStaleNets() {
	live := map[string]bool{}
	out, _ := exec.Command("ip", "-o", "link", "show", "type", "bridge").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], "fst") {
			continue
		}
		name := strings.TrimSuffix(f[1], ":")
		pid := 0
		if _, alias, ok := strings.Cut(line, " alias "); ok {
			pid, _ = strconv.Atoi(strings.Fields(alias)[0])
		}
		// No alias yet: its test binary is between creating and naming it.
		if pid == 0 || syscall.Kill(pid, 0) == nil || syscall.Kill(pid, 0) == syscall.EPERM {
			live[name] = true
			continue
		}
		_ = ipCmd("link", "del", name)
	}
	out, _ = exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "fst") {
			continue
		}
		if bridge, _, ok := strings.Cut(f[0], "-"); ok && !live[bridge] {
			removeNamespace(f[0])
		}
	}
}

// must runs ip with args, failing the test on an error.
func (n *Net) must(args ...string) {
	n.t.Helper()
	if err := ipCmd(args...); err != nil {
		n.t.Fatalf("testenv: %v", err)
	}
}

// ipCmd runs ip(8) with args.
func ipCmd(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ip returns the node's address, "" for nil.
func (nd *NetNode) ip() string {
	if nd == nil {
		return ""
	}
	return nd.IP
}

// netServerOptions make a redis-server listen on nd's address, for nodes
// other than itself (no protected mode: nothing else reaches the Net).
func netServerOptions(nd *NetNode) []ServerOption {
	return []ServerOption{WithConfig("bind", nd.IP), WithConfig("protected-mode", "no")}
}
