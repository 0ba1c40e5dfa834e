package sink

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/tlstest"
)

// TestTLSRefusals: a TLS handshake that fails for a reason of the
// configuration (a TLS-terminating proxy in front of the real engine
// that requires a client certificate; a server certificate that does not
// verify; a port without TLS) is KindTLS, not a network error to retry,
// and its error names the flag to check, from clickhouse-go (Open) and
// ch-go (the INSERT pool) alike.
func TestTLSRefusals(t *testing.T) {
	srv := chenginetest.Server(t)
	certs, other := tlstest.New(t), tlstest.New(t)
	mtls := tlstest.NewProxy(t, certs.Server(true), srv.Addr()).Addr()
	expiredSrv := certs.Server(false)
	expiredSrv.Certificates = []tls.Certificate{certs.Expired(t, true)}
	expired := tlstest.NewProxy(t, expiredSrv, srv.Addr()).Addr()
	plain := httptest.NewServer(http.NotFoundHandler()) // answers a ClientHello in plain text
	defer plain.Close()
	plainAddr := strings.TrimPrefix(plain.URL, "http://")

	client := func(c *tls.Config) *tls.Config {
		if c.RootCAs == nil {
			c.RootCAs = certs.Pool
		}
		return c
	}
	for _, tc := range []struct {
		name, addr string
		tls        *tls.Config
		want       []string // in the error
	}{
		{"certificate required (TLS 1.3)", mtls, client(&tls.Config{}),
			[]string{"requires a client certificate", "--clickhouse-tls-cert", "certificate required"}},
		{"no certificate (TLS 1.2)", mtls, client(&tls.Config{MaxVersion: tls.VersionTLS12}),
			[]string{"rejected the TLS handshake", "--clickhouse-tls-cert", "handshake failure"}},
		{"client certificate of another CA", mtls, client(&tls.Config{Certificates: []tls.Certificate{other.ClientCert}}),
			[]string{"refused the client certificate (unknown certificate authority", "--clickhouse-tls-cert"}},
		{"expired client certificate", mtls, client(&tls.Config{Certificates: []tls.Certificate{certs.Expired(t, false)}}),
			[]string{"refused the client certificate (expired certificate", "--clickhouse-tls-key"}},
		{"server certificate of an unknown authority", mtls, &tls.Config{RootCAs: other.Pool, Certificates: []tls.Certificate{certs.ClientCert}},
			[]string{"not trusted here", "--clickhouse-tls-ca"}},
		{"host name mismatch", mtls, client(&tls.Config{ServerName: "x.example", Certificates: []tls.Certificate{certs.ClientCert}}),
			[]string{"not for the host dialed", "--clickhouse-tls-server-name"}},
		{"expired server certificate", expired, client(&tls.Config{}),
			[]string{"has expired", "renew it"}},
		{"a port without TLS", plainAddr, client(&tls.Config{}),
			[]string{"does not speak TLS", "9440", "--clickhouse-tls"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Addr: []string{tc.addr}, TLS: tc.tls, Database: "default", MaxOpenConns: 1}.withDefaults()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := cfg.Open(ctx)
			if err == nil {
				conn.Close()
				t.Fatal("Open connected")
			}
			cl, perr := newPool(cfg).dial(ctx)
			if perr == nil {
				cl.Close()
				t.Fatal("the pool connected")
			}
			for client, err := range map[string]error{"clickhouse-go": err, "ch-go": perr} {
				if k := Kind(err); k != KindTLS || !IsRetryable(err) {
					t.Errorf("%s: Kind %q (retryable %v), want %q: %v", client, k, IsRetryable(err), KindTLS, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q not in %v", client, w, err)
					}
				}
			}
		})
	}
	// The proxy lets a client with its certificate through.
	cfg := Config{Addr: []string{mtls}, Database: "default", TLS: &tls.Config{RootCAs: certs.Pool, Certificates: []tls.Certificate{certs.ClientCert}}}
	conn, err := cfg.Open(context.Background())
	if err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	conn.Close()
}
