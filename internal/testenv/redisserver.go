package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/redispin"
	"github.com/redis/rueidis"
)

// RedisServer is a private redis-server process (a data node or a
// Sentinel) owned by a test: it listens on 127.0.0.1 on a port of its own,
// keeps its config, log, AOF and cluster files in a directory of its own,
// and is killed when its owner ends. Kill, Stop, Start and Restart cause
// the faults; Start reuses the port, the directory and the config file
// (which Sentinel or CONFIG REWRITE may have changed), so an AOF survives.
type RedisServer struct {
	dir  string
	host string // the address it listens on: 127.0.0.1, or its NetNode's
	port int
	nn   *NetNode // the network namespace it runs in; nil: the test's own
	conf string   // path of the config file
	args []string // after the config file, e.g. --sentinel
	// setup are commands sent after every start: what the config file
	// cannot hold (SENTINEL DEBUG).
	setup [][]string
	// owner fails the test when Start cannot bring the server up; a shared
	// topology hands its servers to each test that asks for it.
	owner atomic.Pointer[testing.TB]

	mu    sync.Mutex
	proc  *child // nil when not running
	admin rueidis.Client
}

// ServerOption changes the redis.conf of a server StartRedis, StartSentinelSet
// or StartCluster starts. (It is not called RedisOption: that name is taken
// by the client options of the shared test server.)
type ServerOption func(*serverConfig)

// serverConfig holds the redis.conf directives in order; a later directive
// overrides an earlier one with the same name.
type serverConfig struct {
	directives [][2]string
}

func (c *serverConfig) set(name, value string) {
	c.directives = append(c.directives, [2]string{name, value})
}

// WithAOF turns on the append-only file with an fsync after every write:
// a write the server acknowledged survives a SIGKILL.
func WithAOF() ServerOption {
	return func(c *serverConfig) {
		c.set("appendonly", "yes")
		c.set("appendfsync", "always")
	}
}

// WithConfig adds a redis.conf directive, written as "name value" (quote
// the value as redis.conf wants it), e.g. WithConfig("maxmemory", "4mb").
func WithConfig(name, value string) ServerOption {
	return func(c *serverConfig) { c.set(name, value) }
}

// Timeouts of the helpers; generous, because the machines that run the
// tests are shared and loaded.
const (
	startTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
)

// StartRedis starts a private Redis node and waits until it answers. It is
// killed when the test ends; a missing redis-server fails the test.
func StartRedis(t testing.TB, opts ...ServerOption) *RedisServer {
	t.Helper()
	s := newRedisServer(t, t.TempDir(), nil, nil, opts)
	t.Cleanup(s.kill)
	s.Start()
	return s
}

// newRedisServer writes the config file of a data node into dir: the
// fixed directives, then base, then opts. It does not start it.
func newRedisServer(t testing.TB, dir string, base []ServerOption, ports []int, opts []ServerOption) *RedisServer {
	t.Helper()
	if ports == nil {
		ports = []int{redisPort(t)}
	}
	var c serverConfig
	c.set("port", fmt.Sprint(ports[0]))
	c.set("bind", "127.0.0.1")
	c.set("dir", dir)
	c.set("logfile", filepath.Join(dir, "redis.log"))
	c.set("save", `""`)
	c.set("appendonly", "no")
	// A replica's full sync starts at once, not after the default 5s wait
	// for more replicas to share the transfer: a Sentinel set, a replica
	// and a cluster node that resyncs after a failover are ready sooner.
	c.set("repl-diskless-sync-delay", "0")
	for _, o := range append(base, opts...) {
		o(&c)
	}
	return newServer(t, dir, ports[0], "redis.conf", c, nil)
}

// newServer writes c to dir/confName and returns the server, not started.
func newServer(t testing.TB, dir string, port int, confName string, c serverConfig, args []string) *RedisServer {
	t.Helper()
	var b strings.Builder
	for _, d := range c.directives {
		fmt.Fprintf(&b, "%s %s\n", d[0], d[1])
	}
	conf := filepath.Join(dir, confName)
	if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	s := &RedisServer{dir: dir, host: "127.0.0.1", port: port, conf: conf, args: args}
	s.owner.Store(&t)
	return s
}

// Addr returns the server's address, 127.0.0.1:port (or its NetNode's
// address and port).
func (s *RedisServer) Addr() string { return fmt.Sprintf("%s:%d", s.host, s.port) }

// NetNode returns the network namespace the server runs in, or nil.
func (s *RedisServer) NetNode() *NetNode { return s.nn }

// URL returns the server as a redis:// URL (database 0), as --redis takes it.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Dir returns the server's directory: config, redis.log, AOF, nodes.conf.
func (s *RedisServer) Dir() string { return s.dir }

// ClientOption returns client options for this one server: a single
// client (no cluster discovery, even on a cluster node), without
// client-side caching.
func (s *RedisServer) ClientOption() rueidis.ClientOption {
	return rueidis.ClientOption{InitAddress: []string{s.Addr()}, ForceSingleClient: true, DisableCache: true}
}

// Client returns a client of this one server, closed when the test ends.
func (s *RedisServer) Client(t testing.TB) rueidis.Client {
	t.Helper()
	return newClient(t, s.ClientOption())
}

// newClient connects with opt and closes the client at cleanup.
func newClient(t testing.TB, opt rueidis.ClientOption) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("testenv: connecting to %v: %v", opt.InitAddress, err)
	}
	t.Cleanup(c.Close)
	return redispin.Wrap(c)
}

// Running reports whether the process runs (it may not answer yet).
func (s *RedisServer) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Start starts the server (again) on its port, directory and config file,
// and waits until it answers PING (not LOADING: an AOF has been read). It
// fails the test if redis-server is missing or the server does not come up
// in time, with the tail of its log.
func (s *RedisServer) Start() {
	t := *s.owner.Load()
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("testenv: redis-server on %s: %v\n%s", s.Addr(), err, s.LogTail(30))
	}
	for _, cmd := range s.setup {
		s.doT(t, cmd...)
	}
}

func (s *RedisServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("already running")
	}
	cmd := s.nn.Command("redis-server", append([]string{s.conf}, s.args...)...)
	cmd.Dir = s.dir
	// redis-server logs to its logfile; what it prints before it opens the
	// log (a bad config) goes to stderr.log.
	out, err := os.OpenFile(filepath.Join(s.dir, "stderr.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	proc, err := startChild(cmd)
	if err != nil {
		return fmt.Errorf("starting redis-server: %w", err)
	}
	s.proc = proc
	return s.waitReady(proc.exited)
}

// waitReady waits until the server answers PING with PONG; a LOADING
// error means it is still reading its AOF.
func (s *RedisServer) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	var err error
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited while starting (last error: %v)", err)
		default:
		}
		if err = pingRaw(s.Addr()); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v: %w", startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pingRaw sends PING on a fresh connection and wants +PONG: a client
// library would hide a LOADING reply behind its own handshake and retries.
func pingRaw(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if reply := strings.TrimSpace(string(buf[:n])); reply != "+PONG" {
		return fmt.Errorf("PING: %s", reply)
	}
	return nil
}

// Kill kills the server with SIGKILL (a crash: nothing is flushed that was
// not already) and waits until it is gone. It does nothing if the server
// is not running.
func (s *RedisServer) Kill() { s.stop(syscall.SIGKILL) }

// Stop shuts the server down with SIGTERM (Redis's SHUTDOWN: with no save
// points configured it writes no RDB; the AOF is flushed) and waits until
// it is gone. A server that takes longer than 30s is killed.
func (s *RedisServer) Stop() { s.stop(syscall.SIGTERM) }

// Pause stops the server with SIGSTOP: it answers nothing and reads
// nothing (a replica falls behind its primary) until Resume. It does
// nothing if the server is not running.
func (s *RedisServer) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (s *RedisServer) Resume() { s.signal(syscall.SIGCONT) }

func (s *RedisServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_ = s.proc.cmd.Process.Signal(sig)
	}
}

// Restart kills the server and starts it again.
func (s *RedisServer) Restart() {
	s.Kill()
	s.Start()
}

// kill is Kill for cleanups, which also closes the admin client.
func (s *RedisServer) kill() {
	s.Kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin != nil {
		s.admin.Close()
		s.admin = nil
	}
}

func (s *RedisServer) stop(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	s.proc.stop(sig, stopTimeout)
	s.proc = nil
}

// LogTail returns the last n lines of the server's log (and of what it
// printed before opening its log).
func (s *RedisServer) LogTail(n int) string {
	var b strings.Builder
	for _, name := range []string{"stderr.log", "redis.log"} {
		data, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "--- %s (last %d lines) ---\n%s\n", filepath.Join(s.dir, name), len(lines), strings.Join(lines, "\n"))
	}
	return b.String()
}

// do runs one command on this server through its admin client, which is
// made on first use and reconnects by itself after a restart.
func (s *RedisServer) do(ctx context.Context, args ...string) rueidis.RedisResult {
	s.mu.Lock()
	if s.admin == nil {
		opt := s.ClientOption()
		opt.DisableRetry = true
		// RESP2: CLUSTER INFO comes as a plain string, not a RESP3
		// verbatim one with a "txt:" prefix.
		opt.AlwaysRESP2 = true
		c, err := rueidis.NewClient(opt)
		if err != nil {
			s.mu.Unlock()
			return rueidis.NewErrorResult(err)
		}
		s.admin = c
	}
	c := s.admin
	s.mu.Unlock()
	return c.Do(ctx, c.B().Arbitrary(args...).Build())
}

// doT is do for a test: a failure fails it.
func (s *RedisServer) doT(t testing.TB, args ...string) rueidis.RedisResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := s.do(ctx, args...)
	if err := r.Error(); err != nil {
		t.Fatalf("testenv: %s on %s: %v", strings.Join(args, " "), s.Addr(), err)
	}
	return r
}

// info returns the fields of INFO section as a map.
func (s *RedisServer) info(ctx context.Context, section string) (map[string]string, error) {
	text, err := s.do(ctx, "INFO", section).ToString()
	if err != nil {
		return nil, err
	}
	return parseFields(text), nil
}

// parseFields parses "name:value" lines (INFO, CLUSTER INFO).
func parseFields(text string) map[string]string {
	m := make(map[string]string)
	for _, line := range strings.Split(text, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}
