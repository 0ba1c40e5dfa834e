package connsec

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// TLS says how a client encrypts its connections. The zero value is plain
// TCP.
type TLS struct {
	// Enable turns TLS on with the system's CAs. Any file or server name
	// below turns it on as well: a CA given to a plain connection can only
	// be a mistake.
	Enable bool
	// CA is a PEM file of the certificate authorities to trust instead of
	// the system's.
	CA string
	// Cert and Key are PEM files of the client certificate and its private
	// key, for servers that authenticate clients by certificate (mutual
	// TLS). Both or neither.
	Cert, Key string
	// ServerName is the name the server's certificate must carry; empty:
	// the host dialed (set it when dialing by IP address or through a
	// proxy).
	ServerName string
}

// Register adds --PREFIX-tls, --PREFIX-tls-ca, --PREFIX-tls-cert,
// --PREFIX-tls-key and --PREFIX-tls-server-name to fs; what names the
// server in the usage texts ("Kafka", "ClickHouse").
func (t *TLS) Register(fs *flag.FlagSet, prefix, what string) {
	fs.BoolVar(&t.Enable, prefix+"-tls", false, "connect to "+what+" over TLS (implied by any other --"+prefix+"-tls-* flag)")
	fs.StringVar(&t.CA, prefix+"-tls-ca", "", "PEM `FILE` of the CAs that sign "+what+"'s certificate (default: the system's)")
	fs.StringVar(&t.Cert, prefix+"-tls-cert", "", "PEM `FILE` of the client certificate, for "+what+" servers that require one (with --"+prefix+"-tls-key)")
	fs.StringVar(&t.Key, prefix+"-tls-key", "", "PEM `FILE` of the client certificate's private key")
	fs.StringVar(&t.ServerName, prefix+"-tls-server-name", "", "`NAME` that "+what+"'s certificate must carry (default: the host dialed)")
}

// Enabled reports whether connections use TLS.
func (t TLS) Enabled() bool {
	return t.Enable || t.CA != "" || t.Cert != "" || t.Key != "" || t.ServerName != ""
}

// maxPEM bounds what a certificate or key file may hold: a chain of a few
// certificates is a few KiB, so anything near this is the wrong file.
const maxPEM = 1 << 20

// Config reads the files and returns the client configuration, or nil
// when TLS is off. TLS 1.2 is the least version offered.
func (t TLS) Config() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CA != "" {
		pem, err := readBounded(t.CA, maxPEM)
		if err != nil {
			return nil, fmt.Errorf("tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca: %s holds no PEM certificate", t.CA)
		}
		c.RootCAs = pool
	}
	switch {
	case t.Cert != "" && t.Key != "":
		cert, err := readBounded(t.Cert, maxPEM)
		if err != nil {
			return nil, fmt.Errorf("tls cert: %w", err)
		}
		key, err := readBounded(t.Key, maxPEM)
		if err != nil {
			return nil, fmt.Errorf("tls key: %w", err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			// The error names no key material.
			return nil, fmt.Errorf("tls client certificate %s with key %s: %w", t.Cert, t.Key, err)
		}
		c.Certificates = []tls.Certificate{pair}
	case t.Cert != "" || t.Key != "":
		return nil, errors.New("tls: a client certificate needs both its file and its key's file")
	}
	return c, nil
}

// readBounded reads file, refusing one larger than limit bytes. Pipes
// are fine (bash's <(...) hands a secret over as /dev/fd/N).
func readBounded(file string, limit int64) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than the %d bytes a file of this kind may have", file, limit)
	}
	return b, nil
}
