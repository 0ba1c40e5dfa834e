package tlstest

import (
	"crypto/tls"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy accepts TLS connections on a loopback port with cfg and forwards
// each, decrypted, to target: a TLS front for a server that speaks only
// plain TCP. It stops, closing every connection, when the test ends.
type Proxy struct {
	ln        net.Listener
	target    string
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	handshook atomic.Int64
	failed    atomic.Int64
}

// NewProxy starts a proxy to target on a free port.
func NewProxy(tb testing.TB, cfg *tls.Config, target string) *Proxy {
	tb.Helper()
	p, err := NewProxyAt(tb, cfg, "127.0.0.1:0", target)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// NewProxyAt starts a proxy to target listening at addr (a fixed port,
// such as a default one), or says why it cannot listen there.
func NewProxyAt(tb testing.TB, cfg *tls.Config, addr, target string) (*Proxy, error) {
	tb.Helper()
	ln, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	tb.Cleanup(p.close)
	return p, nil
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Handshakes counts the TLS handshakes that succeeded; Failed those that
// did not.
func (p *Proxy) Handshakes() int64 { return p.handshook.Load() }

// Failed counts the TLS handshakes that failed.
func (p *Proxy) Failed() int64 { return p.failed.Load() }

// Attempts waits up to within for a handshake to have been tried, then
// returns how many were, succeeded or failed: the proxy counts after its
// side of the handshake ends, which may be after the client has given up.
func (p *Proxy) Attempts(within time.Duration) int64 {
	for end := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		n := p.handshook.Load() + p.failed.Load()
		if n > 0 || time.Now().After(end) {
			return n
		}
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c, true) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c.(*tls.Conn))
	}
}

// track adds or removes c; false when the proxy is closing.
func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) serve(c *tls.Conn) {
	defer p.wg.Done()
	defer func() { c.Close(); p.track(c, false) }()
	if err := c.Handshake(); err != nil {
		p.failed.Add(1)
		return
	}
	p.handshook.Add(1)
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up, true) {
		up.Close()
		return
	}
	defer func() { up.Close(); p.track(up, false) }()
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		io.Copy(dst, src) // an error ends the stream as EOF does
		// Half-close so the other side sees the end of the stream.
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
	<-done
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
