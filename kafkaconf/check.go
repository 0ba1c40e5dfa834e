package kafkaconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrRefused means the brokers refused the connection's security: the
// TLS handshake or the SASL authentication failed. Retrying cannot help;
// the configuration must change.
var ErrRefused = errors.New("kafka refused the connection")

// Pinger is what Check needs of a client: kgo.Client's Ping, which asks
// each seed broker for metadata once, without retrying.
type Pinger interface {
	Ping(ctx context.Context) error
}

var _ Pinger = (*kgo.Client)(nil)

// attemptTimeout bounds one Ping: a TLS client talking to a plaintext
// listener can wait for a handshake that never comes.
const attemptTimeout = 5 * time.Second

// eofRefusals is how many times in a row a broker may close a SASL
// connection without a word before Check calls it a refusal. Kafka
// answers bad credentials with SASL_AUTHENTICATION_FAILED, but some
// brokers (kfake among them) just close the connection, which franz-go
// reports as a bare EOF, the same as a broker going down mid-request.
const eofRefusals = 3

// Check pings (a client made with c's options) until a broker answers,
// ctx ends, or the brokers refuse the connection's TLS or SASL: then it
// returns at once an error that wraps ErrRefused and says what to check.
// Other failures (connection refused, a broker still starting) are
// retried, 100 ms to 1 s apart. The caller bounds the wait through ctx;
// the error then carries the last failure.
func (c Config) Check(ctx context.Context, p Pinger) error {
	wait := 100 * time.Millisecond
	eofs := 0
	var prev error // the attempt before, whose failure is a better "last error" than a cut one
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := p.Ping(actx)
		cancel()
		if err == nil {
			return nil
		}
		if hint := refusal(err, strings.ToLower(c.SASLMechanism)); hint != "" {
			return fmt.Errorf("%w: %s: %w", ErrRefused, hint, err)
		}
		if c.SASLMechanism != "" && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			if eofs++; eofs == eofRefusals {
				return fmt.Errorf("%w: the broker closed the connection during SASL authentication %d times in a row (check --kafka-sasl-mechanism, --kafka-sasl-user and the password): %w", ErrRefused, eofs, err)
			}
		} else {
			eofs = 0
		}
		select {
		case <-ctx.Done():
			if prev != nil && ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
				// The caller's deadline cut this attempt short (a
				// dial, a token request): the one before says why
				// nothing answered.
				err = prev
			}
			var (
				te *TokenError
				ce *CredentialsError
			)
			switch {
			case errors.As(err, &te):
				return fmt.Errorf("the OAuth token endpoint gave no token: %w (last error: %w)", context.Cause(ctx), err)
			case errors.As(err, &ce):
				return fmt.Errorf("the AWS credential chain gave no credentials: %w (last error: %w)", context.Cause(ctx), err)
			}
			hint := ""
			if c.TLS.Enabled() && errors.Is(err, context.DeadlineExceeded) {
				hint = " (a TLS handshake that never ends is the sign of a plaintext listener: is the port the broker's TLS listener?)"
			}
			return fmt.Errorf("no Kafka broker answered: %w (last error: %w)%s", context.Cause(ctx), err, hint)
		case <-time.After(wait):
		}
		prev = err
		wait = min(2*wait, time.Second)
	}
}

// refusal says why err is a refusal of the connection's security, or ""
// when it is not one. mech is the SASL mechanism, lower case.
func refusal(err error, mech string) string {
	var (
		unknownCA  x509.UnknownAuthorityError
		hostname   x509.HostnameError
		invalid    x509.CertificateInvalidError
		verify     *tls.CertificateVerificationError
		record     tls.RecordHeaderError
		op         *net.OpError
		firstRead  *kgo.ErrFirstReadEOF
		kafkaError *kerr.Error
		token      *TokenError
		creds      *CredentialsError
	)
	switch {
	// The mechanism's own failures first: they come before any word
	// with the broker.
	case errors.As(err, &token):
		if token.Refused() {
			return "the OAuth token endpoint refused to give a token (check --kafka-sasl-oauth-token-url, --kafka-sasl-oauth-client-id, the client secret, --kafka-sasl-oauth-scope and --kafka-sasl-oauth-client-auth)"
		}
		return ""
	case errors.As(err, &creds):
		if creds.Refused() {
			return "the AWS credential chain gave no credentials (static AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, web identity: AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, a profile, container or instance role)"
		}
		return ""
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return "the broker's certificate does not verify (check --kafka-tls-ca and --kafka-tls-server-name)"
	case errors.As(err, &record):
		return "the broker does not speak TLS (drop --kafka-tls, or use the broker's TLS listener)"
	case errors.As(err, &op) && op.Op == "remote error":
		// A TLS alert from the broker: crypto/tls reports it so.
		return "the broker rejected the TLS handshake (does it require a client certificate, or not trust this one? check --kafka-tls-cert and --kafka-tls-key)"
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		switch mech {
		case MechanismOAuthBearer:
			return "SASL authentication failed: the broker refused the OAuth token (check --kafka-sasl-oauth-scope, --kafka-sasl-oauth-extension, and that the broker trusts the token's issuer and audience)"
		case MechanismAWSMSKIAM:
			return "SASL authentication failed: the broker refused the IAM signature (check the role's kafka-cluster:Connect permission on the cluster)"
		}
		return "SASL authentication failed (check --kafka-sasl-user and the password)"
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return "the broker does not accept this SASL mechanism (check --kafka-sasl-mechanism)"
	case errors.As(err, &firstRead) && !kgo.IsRetryableBrokerErr(err):
		return "the broker closed the connection at once: it may require TLS or SASL (see --kafka-tls, --kafka-sasl-mechanism)"
	case errors.As(err, &kafkaError) && (kafkaError.Code == kerr.ClusterAuthorizationFailed.Code || kafkaError.Code == kerr.TopicAuthorizationFailed.Code):
		return "the user is not authorized (check the broker's ACLs)"
	}
	return ""
}
