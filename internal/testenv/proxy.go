package testenv

import (
	"net"
	"sync"
	"testing"

	"github.com/flashsale/flashsale/internal/redispin"
	"github.com/redis/rueidis"
)

// Proxy is a TCP proxy to the test Redis that a test can stop and restart
// (Redis unreachable), cut (connections broken) or freeze and thaw (Redis
// silent: what was sent waits, in order), for the clients behind it only.
type Proxy struct {
	addr   string
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
	frozen [2]chan struct{} // per direction (toRedis, toClient): closed when thawed; nil when not frozen
}

// Directions of the traffic through a Proxy.
const (
	toRedis  = 0
	toClient = 1
)

// StartProxy starts a Proxy to the test Redis, stopped at cleanup.
func StartProxy(t testing.TB) *Proxy {
	t.Helper()
	p := &Proxy{addr: "127.0.0.1:0", target: RedisAddr()}
	if err := p.Start(); err != nil {
		t.Fatalf("testenv: starting the proxy: %v", err)
	}
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.Stop)
	return p
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.addr }

// Start listens on the proxy's address (again, after Stop) and forwards
// every connection to Redis.
func (p *Proxy) Start() error {
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
			p.forward(ln, c)
		}
	}()
	return nil
}

// forward connects c, accepted on ln, to Redis, unless ln was closed
// meanwhile: Stop, which has closed the connections it knew of, must not
// be left waiting for one that came in while it did.
func (p *Proxy) forward(ln net.Listener, c net.Conn) {
	r, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln {
		p.mu.Unlock()
		c.Close()
		r.Close()
		return
	}
	p.conns = append(p.conns, c, r)
	p.mu.Unlock()
	for dir, pair := range [][2]net.Conn{{r, c}, {c, r}} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.copy(dir, pair[0], pair[1])
			pair[0].Close()
			pair[1].Close()
		}()
	}
}

// copy forwards src to dst, holding what it read while direction dir is
// frozen.
func (p *Proxy) copy(dir int, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			frozen := p.frozen[dir]
			p.mu.Unlock()
			if frozen != nil {
				<-frozen
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a closed connection
		}
	}
}

// Freeze holds every byte in both directions until Thaw.
func (p *Proxy) Freeze() { p.freeze(toRedis, toClient) }

// FreezeReplies holds what Redis sends until Thaw; commands still reach
// it, so they run while their replies wait.
func (p *Proxy) FreezeReplies() { p.freeze(toClient) }

func (p *Proxy) freeze(dirs ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range dirs {
		if p.frozen[d] == nil {
			p.frozen[d] = make(chan struct{})
		}
	}
}

// Thaw forwards what was held, and everything after it.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for d, ch := range p.frozen {
		if ch != nil {
			close(ch)
			p.frozen[d] = nil
		}
	}
}

// Cut breaks every forwarded connection, dropping what a freeze held; new
// connections are still accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.Thaw() // the held bytes meet closed connections
}

// Stop closes the listener and every forwarded connection.
func (p *Proxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.Cut()
	p.wg.Wait()
}

// Client returns a client that reaches Redis through the proxy, closed at
// cleanup.
func (p *Proxy) Client(t testing.TB) rueidis.Client {
	t.Helper()
	opt := RedisOption()
	opt.InitAddress = []string{p.addr}
	// One connection: commands keep their order, and a freeze holds them
	// all (with several, one opened late would wait on its handshake).
	opt.PipelineMultiplex = -1
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("testenv: connecting through the proxy: %v", err)
	}
	t.Cleanup(c.Close)
	return redispin.Wrap(c)
}
