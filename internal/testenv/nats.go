package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSURL returns the URL of the test NATS server (with JetStream):
// $FLASHSALE_TEST_NATS, or nats://127.0.0.1:4222.
func NATSURL() string {
	if u := os.Getenv("FLASHSALE_TEST_NATS"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// NATS connects to the test NATS server and returns the connection and a
// subject and a stream name unique to this test. The stream, if the test
// creates it, is deleted when the test ends, and the connection closed.
func NATS(t testing.TB) (nc *nats.Conn, subject, stream string) {
	t.Helper()
	return NATSAt(t, NATSURL())
}

// NATSAt is NATS for the server at url.
func NATSAt(t testing.TB, url string) (nc *nats.Conn, subject, stream string) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("testenv: NATS at %s is not reachable (start it with: nats-server -js): %v", url, err)
	}
	u := Unique()
	subject, stream = "test"+u, "TEST"+u
	t.Cleanup(func() {
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Errorf("testenv: jetstream: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, stream); err != nil && err != jetstream.ErrStreamNotFound {
			t.Errorf("testenv: deleting stream %s: %v", stream, err)
		}
	})
	return nc, subject, stream
}

// NATSServer is a private nats-server with JetStream owned by one test,
// for tests that stop and start NATS (an outage) without touching the
// shared server on 4222. It keeps its JetStream store in a temporary
// directory, so what it held survives a Stop and Start.
type NATSServer struct {
	t    testing.TB
	dir  string
	port int
	mu   sync.Mutex
	proc *child // nil when not running
}

// StartNATS starts a private nats-server -js on a free port; it is killed
// when the test ends.
func StartNATS(t testing.TB) *NATSServer {
	t.Helper()
	s := &NATSServer{t: t, dir: t.TempDir(), port: redisPort(t)}
	t.Cleanup(func() { s.stop(syscall.SIGKILL) })
	s.Start()
	return s
}

// URL returns the server's nats:// URL.
func (s *NATSServer) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Start starts the server (again, after Stop) and waits until it answers.
func (s *NATSServer) Start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.t.Fatalf("testenv: private NATS is running already")
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "nats.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatalf("testenv: %v", err)
	}
	defer log.Close()
	cmd := exec.Command("/usr/sbin/nats-server", "-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-js", "-sd", filepath.Join(s.dir, "js"))
	cmd.Stdout, cmd.Stderr = log, log
	proc, err := startChild(cmd)
	if err != nil {
		s.t.Fatalf("testenv: starting nats-server: %v", err)
	}
	s.proc = proc
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(s.URL(), nats.Timeout(time.Second))
		if err == nil {
			nc.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("testenv: private nats-server did not answer within 30s (log in %s): %v", s.dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down (SIGTERM) and waits until it is gone.
func (s *NATSServer) Stop() {
	s.t.Helper()
	s.stop(syscall.SIGTERM)
}

func (s *NATSServer) stop(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.stop(sig, 30*time.Second)
	s.proc = nil
}
