package testenv

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reaches reports whether from can open a TCP connection to addr within a
// second (bash's /dev/tcp, run in from's namespace).
func reaches(from *NetNode, addr string) bool {
	host, port, _ := strings.Cut(addr, ":")
	return from.Command("timeout", "1", "bash", "-c", "exec 3<>/dev/tcp/"+host+"/"+port).Run() == nil
}

// TestNetPartitionIsolateHeal: Partition cuts the groups from each other
// and no one else, Isolate cuts a node from every other, Heal restores
// all; the test reaches every node throughout, and nothing is left once
// the test ends.
func TestNetPartitionIsolateHeal(t *testing.T) {
	n := StartNet(t)
	a, b, c := n.Node("a"), n.Node("b"), n.Node("c")
	var servers []*RedisServer
	for _, nd := range []*NetNode{a, b, c} {
		s := newRedisServer(t, t.TempDir(), netServerOptions(nd), []int{6379}, nil)
		s.place(nd)
		t.Cleanup(s.kill)
		s.Start()
		servers = append(servers, s)
	}
	check := func(what string, want [3][3]bool) {
		t.Helper()
		for i, from := range []*NetNode{a, b, c} {
			for j, to := range servers {
				if i != j && reaches(from, to.Addr()) != want[i][j] {
					t.Errorf("%s: %s reaches %s: %v, want %v", what, from.Name, to.Addr(), !want[i][j], want[i][j])
				}
			}
			if err := pingRaw(servers[i].Addr()); err != nil {
				t.Errorf("%s: the test does not reach %s: %v", what, from.Name, err)
			}
		}
	}
	all := [3][3]bool{{true, true, true}, {true, true, true}, {true, true, true}}
	check("before", all)
	n.Partition([]*NetNode{a}, []*NetNode{b})
	check("a | b", [3][3]bool{{true, false, true}, {false, true, true}, {true, true, true}})
	n.Heal()
	n.Isolate(c)
	check("c isolated", [3][3]bool{{true, true, false}, {true, true, false}, {false, false, true}})
	n.Heal()
	check("healed", all)
	// No route off the machine from a node.
	if out, err := a.Command("ip", "route", "get", "192.0.2.1").CombinedOutput(); err == nil {
		t.Errorf("a node has a route off its net: %s", out)
	}
	fwd := n.Forward(servers[0].Addr())
	if !reaches(b, fwd) {
		t.Errorf("b does not reach the test's forwarder %s", fwd)
	}
}

// TestNetPartitionPrimaryIsolated: a primary cut from its Sentinels and
// replicas is replaced by one of its two replicas, and after Heal it
// follows the new primary.
func TestNetPartitionPrimaryIsolated(t *testing.T) {
	n := StartNet(t)
	s := StartNetSentinelSet(t, n, 2)
	old := s.Primary()
	var rest []*NetNode
	for _, r := range append(s.Replicas(), s.Sentinels()...) {
		rest = append(rest, r.NetNode())
	}
	n.Partition([]*NetNode{old.NetNode()}, rest)
	promoted := s.WaitPromoted(t, old.Addr(), 30*time.Second)
	n.Heal()
	if got := s.WaitFailover(t, old.Addr(), 30*time.Second); got != promoted {
		t.Errorf("promoted %s, then the Sentinels agree on %s", promoted, got)
	}
	s.WaitReplicaSync(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := old.info(ctx, "replication")
	if err != nil || info["role"] != "slave" {
		t.Errorf("the old primary after Heal: %v %v", info["role"], err)
	}
}

// TestNetPartitionStaleRemoved: what a crashed test binary left (a bridge
// named for a dead PID, its namespace) is removed by the next one.
func TestNetPartitionStaleRemoved(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	bridge := "fst255"
	ns := bridge + "-stale"
	for _, args := range [][]string{
		{"link", "add", bridge, "type", "bridge"},
		{"link", "set", bridge, "alias", strconv.Itoa(dead.Process.Pid)},
		{"netns", "add", ns},
	} {
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleNets()
	if ipCmd("link", "show", bridge) == nil {
		t.Errorf("the stale bridge %s is still there", bridge)
		_ = ipCmd("link", "del", bridge)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), ns) {
		t.Errorf("the stale namespace %s is still there", ns)
		_ = ipCmd("netns", "del", ns)
	}
}
