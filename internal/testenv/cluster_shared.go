package testenv

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// shared holds the topologies shared by the tests of one test binary.
var shared struct {
	mu      sync.Mutex
	running bool // RunMain runs the tests
	cluster *Cluster
	dir     string // the shared cluster's directory
}

// RunMain runs the tests and then kills the shared topologies and removes
// their files. Packages that use SharedCluster call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }
func RunMain(m *testing.M) int {
	shared.mu.Lock()
	shared.running = true
	shared.mu.Unlock()
	defer dropShared()
	return m.Run()
}

// SharedCluster returns the test binary's shared cluster (three masters,
// three replicas), started on first use. A test may kill, restart and
// migrate its nodes; the next SharedCluster call checks the cluster (every
// node running, cluster_state:ok and all slots covered everywhere,
// replicas linked) and, if it is not healthy within a few seconds,
// replaces it with a fresh one. Tests share its keyspace: use key
// prefixes from Unique, and do not run tests that cause faults on it in
// parallel with others that use it. Without RunMain in TestMain it fails
// the test.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.running {
		t.Fatalf("testenv: SharedCluster needs func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) } in the package")
	}
	if c := shared.cluster; c != nil {
		for _, n := range c.nodes {
			n.owner.Store(&t)
		}
		// A cluster whose nodes all run may still be settling after a
		// test's failover; one with a dead node is replaced at once.
		deadline := time.Now().Add(5 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := c.healthy(ctx)
			cancel()
			if err == nil {
				return c
			}
			if !c.allRunning() || time.Now().After(deadline) {
				t.Logf("testenv: the shared cluster is not healthy (%v): starting a fresh one", err)
				dropSharedLocked()
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	dir, err := os.MkdirTemp("", "testenv-cluster-")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	shared.dir = dir
	i := 0
	tempDir := func() string {
		i++
		d := filepath.Join(dir, "node"+string(rune('0'+i)))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		return d
	}
	var nodes []*RedisServer
	shared.cluster = &Cluster{} // so that a failed start is still torn down
	track := func(n *RedisServer) {
		nodes = append(nodes, n)
		shared.cluster.nodes = nodes
	}
	c := startCluster(t, tempDir, track, nil)
	shared.cluster = c
	return c
}

// allRunning reports whether every node of c runs.
func (c *Cluster) allRunning() bool {
	for _, n := range c.nodes {
		if !n.Running() {
			return false
		}
	}
	return true
}

// dropShared kills the shared topologies and removes their files.
func dropShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	dropSharedLocked()
}

func dropSharedLocked() {
	if shared.cluster != nil {
		for _, n := range shared.cluster.nodes {
			n.kill()
		}
		shared.cluster = nil
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
		shared.dir = ""
	}
}
