package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// child is a server process a test started.
type child struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// startChild starts cmd; on Linux the kernel kills it if the test binary
// dies before its cleanups run.
func startChild(cmd *exec.Cmd) (*child, error) {
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status of a server we stop ourselves says nothing
		close(c.exited)
	}()
	return c, nil
}

// stop sends sig to the process and waits until it has exited; one that
// outlives timeout is killed.
func (c *child) stop(sig syscall.Signal, timeout time.Duration) {
	_ = c.cmd.Process.Signal(sig) // it may have exited on its own
	select {
	case <-c.exited:
	case <-time.After(timeout):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

// redisPort returns a port nobody listens on, below the kernel's ephemeral
// range (32768 and up on Linux): a server that is down for a while must
// find its port free again when it restarts, and an outgoing connection
// could take an ephemeral one meanwhile.
func redisPort(t testing.TB) int {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		if portsTaken.add(port) {
			return port
		}
	}
	t.Fatalf("testenv: no free port for redis-server in 20000-31999")
	return 0
}

// portsTaken remembers the ports handed out in this process, so two
// servers that are not running right now never get the same one.
var portsTaken = portSet{m: make(map[int]bool)}

type portSet struct {
	mu sync.Mutex
	m  map[int]bool
}

func (p *portSet) add(port int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[port] {
		return false
	}
	p.m[port] = true
	return true
}
