package sink

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
)

// tlsRefusal is a TLS handshake that failed for a reason of the
// configuration, not of the network: the server refused the client's
// certificate (or its lack of one), or the server's certificate did not
// verify, or the port does not speak TLS. Its Kind is KindTLS. The hint
// names the resolverd flags to check, as kafkaconf's check names Kafka's.
type tlsRefusal struct {
	hint string
	err  error
}

func (e *tlsRefusal) Error() string { return "TLS: " + e.hint + ": " + e.err.Error() }

func (e *tlsRefusal) Unwrap() error { return e.err }

// withTLSHint wraps err as a *tlsRefusal when tlsHint finds it one; any
// other error is returned as is.
func withTLSHint(err error) error {
	var r *tlsRefusal
	if err == nil || errors.As(err, &r) {
		return err
	}
	if h := tlsHint(err); h != "" {
		return &tlsRefusal{hint: h, err: err}
	}
	return err
}

// The alerts a TLS server sends when it refuses the client's certificate,
// as crypto/tls words them ("remote error: tls: ..."): its alert type is
// unexported, its text is stable. 116 is TLS 1.3's certificate_required,
// which a TLS 1.2 server cannot send (it says handshake_failure).
var certAlerts = map[string]bool{
	"tls: bad certificate":               true, // 42
	"tls: unsupported certificate":       true, // 43
	"tls: revoked certificate":           true, // 44
	"tls: expired certificate":           true, // 45
	"tls: unknown certificate":           true, // 46
	"tls: unknown certificate authority": true, // 48
	"tls: access denied":                 true, // 49
}

// tlsHint says what to check when err is a TLS handshake refused for a
// reason of the configuration, or "" when it is not one. These errors are
// the same on every try: they are not retried at start-up.
func tlsHint(err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
		op        *net.OpError
	)
	switch {
	case errors.As(err, &op) && op.Op == "remote error" && op.Err != nil:
		// An alert from the server: crypto/tls reports it so.
		switch alert := op.Err.Error(); {
		case alert == "tls: certificate required":
			return "ClickHouse requires a client certificate and none was sent (check --clickhouse-tls-cert and --clickhouse-tls-key)"
		case certAlerts[alert]:
			return "ClickHouse refused the client certificate (" + alert[len("tls: "):] + ": check --clickhouse-tls-cert and --clickhouse-tls-key; is it signed by a CA the server trusts, and still valid?)"
		default:
			return "ClickHouse rejected the TLS handshake (does it require a client certificate? check --clickhouse-tls-cert and --clickhouse-tls-key; or it accepts no TLS version or cipher offered)"
		}
	case errors.As(err, &unknownCA):
		return "ClickHouse's certificate is signed by an authority not trusted here (check --clickhouse-tls-ca)"
	case errors.As(err, &hostname):
		return "ClickHouse's certificate is not for the host dialed (check --clickhouse-tls-server-name, or dial a name the certificate carries)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "ClickHouse's certificate has expired or is not valid yet (renew it on the server, or check this machine's clock)"
	case errors.As(err, &invalid), errors.As(err, &verify):
		return "ClickHouse's certificate does not verify (check --clickhouse-tls-ca and --clickhouse-tls-server-name)"
	case errors.As(err, &record):
		return "the port does not speak TLS (ClickHouse's plain native port is 9000, its secure one 9440: check --clickhouse, or drop --clickhouse-tls)"
	}
	return ""
}
