package httpapi

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/audit"
)

// serve runs the handler of cfg behind a Server of scfg on loopback.
func serve(t *testing.T, cfg Config, scfg ServerConfig) (addr string, reg *prometheus.Registry) {
	t.Helper()
	reg = prometheus.NewRegistry()
	cfg.Store = sampleStore(t)
	cfg.Gatherer, cfg.Registerer = reg, reg
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(h, scfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String(), reg
}

const okCall = `{"type":"call","event_id":"c-1","emitted_at":"2026-12-01T00:14:16.129Z","registry":"r","tool":"t","arguments":{}}`

// rawRequest writes a request head declaring length body bytes.
func rawRequest(length int) string {
	return fmt.Sprintf("POST /v1/resolve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", length)
}

// statusLine reads the status line of an answer on c, within d.
func statusLine(t *testing.T, c net.Conn, d time.Duration) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(line)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSlowBody: a body trickling in (one byte every 100ms of a declared
// 100,000) is cut off at the read timeout with 408.
func TestSlowBody(t *testing.T) {
	addr, _ := serve(t, Config{}, ServerConfig{ReadTimeout: 500 * time.Millisecond})
	c := dial(t, addr)
	start := time.Now()
	if _, err := io.WriteString(c, rawRequest(100000)); err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := 0; i < 50; i++ {
			if _, err := c.Write([]byte{'{'}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	if got := statusLine(t, c, 5*time.Second); got != "HTTP/1.1 408 Request Timeout" {
		t.Fatalf("answer %q", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answered after %v", d)
	}
}

// TestIdleConnections: a connection that sends nothing is closed after
// the header timeout; a keep-alive connection after the idle timeout.
func TestIdleConnections(t *testing.T) {
	addr, _ := serve(t, Config{}, ServerConfig{ReadHeaderTimeout: 300 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	silent := dial(t, addr)
	kept := dial(t, addr)
	io.WriteString(kept, rawRequest(len(okCall))+okCall)
	r := bufio.NewReader(kept)
	resp, err := http.ReadResponse(r, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	for name, c := range map[string]net.Conn{"silent": silent, "idle keep-alive": kept} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		start := time.Now()
		var err error
		if name == "silent" {
			_, err = c.Read(make([]byte, 1))
		} else {
			_, err = r.ReadByte()
		}
		if err != io.EOF || time.Since(start) > 2*time.Second {
			t.Fatalf("%s connection: %v after %v, want EOF within the timeout", name, err, time.Since(start))
		}
	}
}

// TestMaxConns: beyond MaxConns open connections, a new one is answered
// 503 and closed; once one closes, connections are taken again.
func TestMaxConns(t *testing.T) {
	addr, reg := serve(t, Config{}, ServerConfig{MaxConns: 5})
	var open []net.Conn
	for i := 0; i < 5; i++ {
		c := dial(t, addr)
		io.WriteString(c, rawRequest(len(okCall))+okCall)
		if got := statusLine(t, c, 5*time.Second); got != "HTTP/1.1 200 OK" {
			t.Fatalf("connection %d: %q", i, got)
		}
		open = append(open, c)
	}
	extra := dial(t, addr)
	if got := statusLine(t, extra, 5*time.Second); got != "HTTP/1.1 503 Service Unavailable" {
		t.Fatalf("sixth connection: %q", got)
	}
	if n := metricSum(t, reg, "toolaudit_http_connections_refused_total"); n != 1 {
		t.Fatalf("refused %v", n)
	}
	open[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := dial(t, addr)
		io.WriteString(c, rawRequest(len(okCall))+okCall)
		got := statusLine(t, c, 5*time.Second)
		if got == "HTTP/1.1 200 OK" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a close: %q", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInFlightRequests: beyond MaxInFlight requests being answered (here
// held by a slow audit trail), a request is answered 503 at once.
func TestInFlightRequests(t *testing.T) {
	release := make(chan struct{})
	var waiting atomic.Int32
	slow := audit.ProducerFunc(func(ctx context.Context, _ ...*audit.Record) error {
		waiting.Add(1)
		<-release
		return nil
	})
	addr, _ := serve(t, Config{Audit: slow, MaxInFlight: 2}, ServerConfig{})
	url := "http://" + addr + "/v1/resolve"
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for i := 0; i < 2; i++ {
		wg.Go(func() {
			resp, err := http.Post(url, "application/json", strings.NewReader(okCall))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	for waiting.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	resp, err := http.Post(url, "application/json", strings.NewReader(okCall))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), `"overloaded"`) {
		t.Fatalf("third request: %d %s", resp.StatusCode, b)
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("held request: %d", c)
		}
	}
}

// TestBodyBytesInFlight: connections holding unfinished bodies reserve
// their declared length; beyond MaxInFlightBytes a request is answered
// 503 before its body is read, so memory stays bounded (issue 10: 3,000
// connections each holding about 1 MB took 3.37 GB).
func TestBodyBytesInFlight(t *testing.T) {
	const (
		conns    = 200
		declared = 1 << 20
		sent     = 512 << 10
		budget   = 8 << 20
	)
	addr, _ := serve(t, Config{MaxInFlightBytes: budget, MaxInFlight: 1000}, ServerConfig{MaxConns: 1000, ReadTimeout: 30 * time.Second})
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	chunk := []byte(`{"pad":"` + strings.Repeat("x", sent-8))
	var refused, held atomic.Int32
	var wg sync.WaitGroup
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = dial(t, addr)
	}
	for _, c := range cs {
		wg.Go(func() {
			if _, err := io.WriteString(c, rawRequest(declared)); err != nil {
				return
			}
			c.Write(chunk) // then stall
			if statusLine(t, c, 3*time.Second) == "HTTP/1.1 503 Service Unavailable" {
				refused.Add(1)
			} else {
				held.Add(1)
			}
		})
	}
	wg.Wait()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d connections: %d held, %d refused; heap in use grew %d MiB", conns, held.Load(), refused.Load(), growth>>20)
	if held.Load() != budget/declared || refused.Load() != conns-budget/declared {
		t.Fatalf("%d held, %d refused; want %d held", held.Load(), refused.Load(), budget/declared)
	}
	if growth > 64<<20 {
		t.Fatalf("heap grew by %d MiB", growth>>20)
	}
}

// TestTLS: with a certificate, the server speaks TLS (HTTP/2 offered),
// refuses plain HTTP, and Reload takes a renewed certificate.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	pool := x509.NewCertPool()
	writeCert := func(serial int64) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "resolverd"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		pool.AddCert(c)
		kb, _ := x509.MarshalECPrivateKey(key)
		os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
		os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	}
	writeCert(1)
	reg := prometheus.NewRegistry()
	h, err := New(Config{Store: sampleStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(h, ServerConfig{TLSCert: certFile, TLSKey: keyFile}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	defer func() { srv.Shutdown(context.Background()); <-done }()
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func() (*http.Response, error) {
		resp, err := client.Post("https://"+ln.Addr().String()+"/v1/resolve", "application/json", strings.NewReader(okCall))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	resp, err := get()
	if err != nil || resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 1 {
		t.Fatalf("TLS request: %v %v", resp, err)
	}
	plain, err := http.Post("http://"+ln.Addr().String()+"/v1/resolve", "application/json", strings.NewReader(okCall))
	if err == nil {
		b, _ := io.ReadAll(plain.Body)
		plain.Body.Close()
		if plain.StatusCode == 200 {
			t.Fatalf("plain HTTP answered 200: %s", b)
		}
	}
	writeCert(2)
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	if resp, err := get(); err != nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 2 {
		t.Fatalf("after Reload: %v %v", resp, err)
	}
	os.WriteFile(certFile, []byte("garbage"), 0o600)
	if err := srv.Reload(); err == nil {
		t.Fatal("Reload took a broken certificate")
	}
	tr.CloseIdleConnections()
	if resp, err := get(); err != nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 2 {
		t.Fatalf("after a failed Reload: %v %v", resp, err)
	}
}

// TestNoTimeouts: a negative read or write timeout is none (long-lived
// event streams), zero the default.
func TestNoTimeouts(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
	}{{0, DefaultWriteTimeout}, {-1, 0}, {time.Minute, time.Minute}} {
		s, err := NewServer(http.NotFoundHandler(), ServerConfig{ReadTimeout: tc.in, WriteTimeout: tc.in}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantRead := tc.want
		if tc.in == 0 {
			wantRead = DefaultReadTimeout
		}
		if s.srv.WriteTimeout != tc.want || s.srv.ReadTimeout != wantRead {
			t.Errorf("%v: read %v write %v", tc.in, s.srv.ReadTimeout, s.srv.WriteTimeout)
		}
	}
}
