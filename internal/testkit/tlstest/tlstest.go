// Package tlstest gives TLS tests their certificates (New: a CA, a server
// certificate for loopback and a client certificate signed by it, as
// tls.Configs and PEM files) and a TLS-terminating proxy (Proxy) for
// servers that cannot serve TLS themselves, such as the embedded
// ClickHouse engine. Every test makes its own certificates: nothing is
// checked in, nothing expires between runs.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Set is one CA and the certificates it signed, with their PEM files in a
// test's temporary directory.
type Set struct {
	CAFile         string // the CA's certificate
	ServerCert     tls.Certificate
	ServerCertFile string // for DNS names localhost and ServerName, IP 127.0.0.1
	ServerKeyFile  string
	ClientCert     tls.Certificate
	ClientCertFile string // for client authentication, CN "toolaudit-test"
	ClientKeyFile  string
	Pool           *x509.CertPool // holds the CA
	ServerName     string         // a DNS name the server certificate carries besides localhost
	caCert         *x509.Certificate
	caKey          *ecdsa.PrivateKey
}

// ServerName is the extra DNS name of every server certificate.
const ServerName = "broker.toolaudit.test"

// New makes a CA and a server and a client certificate signed by it.
func New(tb testing.TB) *Set {
	tb.Helper()
	dir := tb.TempDir()
	s := &Set{Pool: x509.NewCertPool(), ServerName: ServerName}
	var err error
	s.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "toolaudit test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &s.caKey.PublicKey, s.caKey)
	if err != nil {
		tb.Fatal(err)
	}
	if s.caCert, err = x509.ParseCertificate(der); err != nil {
		tb.Fatal(err)
	}
	s.Pool.AddCert(s.caCert)
	s.CAFile = filepath.Join(dir, "ca.pem")
	write(tb, s.CAFile, "CERTIFICATE", der)
	s.ServerCert, s.ServerCertFile, s.ServerKeyFile = s.issue(tb, dir, "server", serverTemplate(), time.Now().Add(24*time.Hour))
	s.ClientCert, s.ClientCertFile, s.ClientKeyFile = s.issue(tb, dir, "client", clientTemplate(), time.Now().Add(24*time.Hour))
	return s
}

func serverTemplate() *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost", ServerName},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
}

func clientTemplate() *x509.Certificate {
	return &x509.Certificate{
		Subject:     pkix.Name{CommonName: "toolaudit-test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
}

// Expired is a certificate signed by the CA like ServerCert (server) or
// ClientCert, that expired a minute ago.
func (s *Set) Expired(tb testing.TB, server bool) tls.Certificate {
	tb.Helper()
	tmpl, name := clientTemplate(), "expired-client"
	if server {
		tmpl, name = serverTemplate(), "expired-server"
	}
	c, _, _ := s.issue(tb, tb.TempDir(), name, tmpl, time.Now().Add(-time.Minute))
	return c
}

func (s *Set) issue(tb testing.TB, dir, name string, tmpl *x509.Certificate, notAfter time.Time) (tls.Certificate, string, string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64)); err != nil {
		tb.Fatal(err)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), notAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.caCert, &key.PublicKey, s.caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	write(tb, certFile, "CERTIFICATE", der)
	write(tb, keyFile, "EC PRIVATE KEY", keyDER)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		tb.Fatal(err)
	}
	return pair, certFile, keyFile
}

// Server is a server configuration with the server certificate; with
// clientAuth it requires a client certificate signed by the CA.
func (s *Set) Server(clientAuth bool) *tls.Config {
	c := &tls.Config{Certificates: []tls.Certificate{s.ServerCert}, MinVersion: tls.VersionTLS12}
	if clientAuth {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, s.Pool
	}
	return c
}

func write(tb testing.TB, file, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
}
