package idgen

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"

	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/redis/rueidis"
)

// newGen returns a Generator on the test's prefix that logs to the test
// output and is closed when the test ends.
func newGen(t testing.TB, c rueidis.Client, prefix, name string, opts ...Option) *Generator {
	t.Helper()
	opts = append([]Option{WithPrefix(prefix), WithLogger(slog.New(slog.NewTextHandler(t.Output(), nil)))}, opts...)
	g := New(c, name, opts...)
	t.Cleanup(g.Close)
	return g
}

// newClient returns another client of the test Redis, as a separate
// process would have.
func newClient(t testing.TB) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(testenv.RedisOption())
	if err != nil {
		t.Fatalf("connecting to Redis: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// take returns n IDs from g, failing the test on an error.
func take(t testing.TB, g *Generator, n int) []int64 {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		id, err := g.NextID(context.Background())
		if err != nil {
			t.Fatalf("NextID after %d ids: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}

// checkIncreasing fails the test if ids are not strictly increasing.
func checkIncreasing(t testing.TB, what string, ids []int64) {
	t.Helper()
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			t.Fatalf("%s: id %d (%d) is not above the one before (%d)", what, i, ids[i], ids[i-1])
		}
	}
}

// checkUnique fails the test if any ID appears twice across all lists, and
// returns how many IDs there were.
func checkUnique(t testing.TB, lists ...[]int64) int {
	t.Helper()
	seen := make(map[int64]bool)
	for _, ids := range lists {
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("id %d was handed out twice", id)
			}
			seen[id] = true
		}
	}
	return len(seen)
}

// settle waits until g has no fetch in flight, so its prefetched range, if
// any, is in place.
func settle(g *Generator) {
	for {
		g.mu.Lock()
		fetching, done := g.fetching, g.done
		g.mu.Unlock()
		if !fetching {
			return
		}
		<-done
	}
}

// proxy is a TCP proxy to the test Redis that the test can cut and restore,
// making Redis unreachable for the clients behind it.
type proxy struct {
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	wg     sync.WaitGroup
	target string
}

func startProxy(t testing.TB) *proxy {
	t.Helper()
	p := &proxy{addr: "127.0.0.1:0", target: testenv.RedisAddr()}
	if err := p.start(); err != nil {
		t.Fatalf("starting the proxy: %v", err)
	}
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.stop)
	return p
}

// start listens on p.addr and forwards every connection to Redis.
func (p *proxy) start() error {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.forward(c)
		}
	}()
	return nil
}

func (p *proxy) forward(c net.Conn) {
	r, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, r)
	p.mu.Unlock()
	for _, pair := range [][2]net.Conn{{c, r}, {r, c}} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			io.Copy(pair[0], pair[1])
			pair[0].Close()
			pair[1].Close()
		}()
	}
}

// stop closes the listener and every forwarded connection.
func (p *proxy) stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// client returns a client that reaches Redis through the proxy.
func (p *proxy) client(t testing.TB) rueidis.Client {
	t.Helper()
	opt := testenv.RedisOption()
	opt.InitAddress = []string{p.addr}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("connecting through the proxy: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// redisSecond returns Redis's clock in seconds since DefaultEpoch.
func redisSecond(c rueidis.Client) (int64, error) {
	v, err := c.Do(context.Background(), c.B().Time().Build()).AsIntSlice()
	if err != nil {
		return 0, err
	}
	return v[0] - DefaultEpoch.Unix(), nil
}
