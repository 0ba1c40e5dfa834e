package httpapi

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/httpapi/apierror"
	"github.com/toolaudit/toolaudit/internal/promutil"
)

// ServerConfig bounds what one client can hold of the server: time to
// send a request, idle keep-alive connections, connections at once. The
// zero value takes every default.
type ServerConfig struct {
	// ReadHeaderTimeout bounds the request line and headers; ReadTimeout
	// the whole request, body included (a body trickling in is cut off
	// and answered 408); WriteTimeout the answer, which includes waiting
	// for the audit trail's acknowledgement; IdleTimeout a keep-alive
	// connection between requests. Defaults 5s, 10s, 15s, 60s. A
	// negative ReadTimeout or WriteTimeout is none: a server of
	// long-lived event streams (the MCP gateway's GET /mcp) needs none,
	// since net/http cancels a request whose connection passes either.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request headers. Default 64 KiB.
	MaxHeaderBytes int
	// MaxConns bounds the connections open at once; a connection beyond
	// it is answered 503 and closed at once (closed without an answer
	// under TLS, before the handshake). Default 4096.
	MaxConns int
	// TLSCert and TLSKey are PEM files: with both, the server speaks TLS
	// 1.2 or later only (HTTP/2 included); Reload reads them again.
	TLSCert, TLSKey string
}

// Defaults of ServerConfig.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 15 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxConns          = 4096
)

func (c *ServerConfig) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	orNone := func(d *time.Duration, v time.Duration) {
		switch {
		case *d == 0:
			*d = v
		case *d < 0:
			*d = 0 // net/http's none
		}
	}
	def(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	orNone(&c.ReadTimeout, DefaultReadTimeout)
	orNone(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.IdleTimeout, DefaultIdleTimeout)
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
}

// Server is an http.Server with ServerConfig's bounds, optionally TLS.
type Server struct {
	srv   *http.Server
	cfg   ServerConfig
	cert  atomic.Pointer[tls.Certificate]
	log   *slog.Logger
	conns prometheus.Gauge
	shed  prometheus.Counter
}

// NewServer returns a server of h. With TLS configured it loads the
// certificate now, so a bad file fails at start. A nil log logs nothing;
// a nil reg registers no metrics.
func NewServer(h http.Handler, cfg ServerConfig, log *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	cfg.defaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("httpapi: TLS needs both a certificate and a key file")
	}
	s := &Server{cfg: cfg, log: log}
	s.srv = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		WriteTimeout:      cfg.WriteTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if cfg.TLSCert != "" {
		if err := s.Reload(); err != nil {
			return nil, err
		}
		s.srv.TLSConfig = &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil },
			NextProtos:     []string{"h2", "http/1.1"},
		}
	}
	s.conns = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolaudit_http_connections",
		Help: "HTTP connections open.",
	})
	s.shed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolaudit_http_connections_refused_total",
		Help: "HTTP connections refused because MaxConns were open.",
	})
	if err := promutil.Register(reg, s.conns, s.shed); err != nil {
		return nil, err
	}
	return s, nil
}

// TLS reports whether the server speaks TLS.
func (s *Server) TLS() bool { return s.cfg.TLSCert != "" }

// Reload reads the certificate and key again (a renewed certificate);
// on error the one in use stays. Without TLS it does nothing.
func (s *Server) Reload() error {
	if s.cfg.TLSCert == "" {
		return nil
	}
	c, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
	if err != nil {
		return fmt.Errorf("httpapi: TLS certificate: %w", err)
	}
	if s.cert.Swap(&c) != nil {
		s.log.Info("TLS certificate reloaded", "cert", s.cfg.TLSCert)
	}
	return nil
}

// Serve serves on ln until Shutdown; it returns http.ErrServerClosed
// then.
func (s *Server) Serve(ln net.Listener) error {
	ln = &limitListener{Listener: ln, max: int64(s.cfg.MaxConns), tls: s.TLS(), open: s.conns, shed: s.shed}
	if s.TLS() {
		ln = tls.NewListener(ln, s.srv.TLSConfig)
	}
	return s.srv.Serve(ln)
}

// Shutdown stops accepting, waits for the requests in flight until ctx
// ends, then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	return err
}

// limitListener refuses connections beyond max open ones, answering them
// 503 (plain HTTP) or closing them (TLS, whose handshake comes later).
type limitListener struct {
	net.Listener
	max  int64
	tls  bool
	n    atomic.Int64
	open prometheus.Gauge
	shed prometheus.Counter
}

// overloaded is written to a connection refused for MaxConns.
var overloaded = func() []byte {
	body := apierror.Append(nil, codeOverloaded, "too many connections open; retry")
	return fmt.Appendf(nil, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		apierror.RetryAfterSeconds, len(body), body)
}()

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.n.Add(1) > l.max {
			l.n.Add(-1)
			l.shed.Inc()
			// Answered aside: a client slow to read must not hold up Accept.
			go func() {
				if !l.tls {
					c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
					c.Write(overloaded)
				}
				c.Close()
			}()
			continue
		}
		l.open.Inc()
		return &countedConn{Conn: c, l: l}, nil
	}
}

type countedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() {
		c.l.n.Add(-1)
		c.l.open.Dec()
	})
	return c.Conn.Close()
}
