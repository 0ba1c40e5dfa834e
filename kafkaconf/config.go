package kafkaconf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/toolaudit/toolaudit/internal/connsec"
)

// EnvSASLPassword is the environment variable of the SASL password when
// --kafka-sasl-password-file is not given.
const EnvSASLPassword = "TOOLAUDIT_KAFKA_SASL_PASSWORD"

// The standard AWS variables of aws-msk-iam's static credentials.
const (
	EnvAWSAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvAWSSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvAWSSessionToken    = "AWS_SESSION_TOKEN"
)

// SASL mechanisms, as the --kafka-sasl-mechanism flag names them.
const (
	MechanismPlain       = "plain"
	MechanismScramSHA256 = "scram-sha-256"
	MechanismScramSHA512 = "scram-sha-512"
	MechanismAWSMSKIAM   = "aws-msk-iam"
)

// Config is a Kafka client's connection security. The zero value is
// plain TCP without authentication.
type Config struct {
	TLS connsec.TLS
	// SASLMechanism is one of the Mechanism constants; empty: no SASL.
	SASLMechanism string
	// SASLUser is the user of plain and SCRAM.
	SASLUser string
	// SASLPasswordFile holds the password of plain and SCRAM; empty: the
	// variable EnvSASLPassword.
	SASLPasswordFile string
}

// Register adds the --kafka-tls* and --kafka-sasl-* flags to fs.
func (c *Config) Register(fs *flag.FlagSet) {
	c.TLS.Register(fs, "kafka", "Kafka")
	fs.StringVar(&c.SASLMechanism, "kafka-sasl-mechanism", "", "SASL `MECHANISM` to authenticate to Kafka with: plain, scram-sha-256, scram-sha-512 or aws-msk-iam (default: none)")
	fs.StringVar(&c.SASLUser, "kafka-sasl-user", "", "SASL `USER` of plain and SCRAM")
	fs.StringVar(&c.SASLPasswordFile, "kafka-sasl-password-file", "", "`FILE` holding the SASL password (default: the "+EnvSASLPassword+" variable; never a flag value, which ps shows)")
}

// Enabled reports whether c asks for TLS or SASL.
func (c Config) Enabled() bool { return c.TLS.Enabled() || c.SASLMechanism != "" }

// Validate checks the flags' consistency without reading any file.
func (c Config) Validate(getenv func(string) string) error {
	pw := connsec.Secret{File: c.SASLPasswordFile, Env: EnvSASLPassword}
	switch strings.ToLower(c.SASLMechanism) {
	case "":
		if c.SASLUser != "" || c.SASLPasswordFile != "" {
			return errors.New("--kafka-sasl-user and --kafka-sasl-password-file need --kafka-sasl-mechanism")
		}
	case MechanismPlain, MechanismScramSHA256, MechanismScramSHA512:
		if c.SASLUser == "" {
			return fmt.Errorf("--kafka-sasl-mechanism %s needs --kafka-sasl-user", c.SASLMechanism)
		}
		if !pw.Given(getenv) {
			return fmt.Errorf("--kafka-sasl-mechanism %s needs a password: --kafka-sasl-password-file FILE or the %s variable", c.SASLMechanism, EnvSASLPassword)
		}
	case MechanismAWSMSKIAM:
		if c.SASLUser != "" || c.SASLPasswordFile != "" {
			return errors.New("--kafka-sasl-mechanism aws-msk-iam takes no user or password: it signs with " + EnvAWSAccessKeyID + " and " + EnvAWSSecretAccessKey)
		}
		if getenv(EnvAWSAccessKeyID) == "" || getenv(EnvAWSSecretAccessKey) == "" {
			return fmt.Errorf("--kafka-sasl-mechanism aws-msk-iam needs %s and %s in the environment", EnvAWSAccessKeyID, EnvAWSSecretAccessKey)
		}
		if !c.TLS.Enabled() {
			return errors.New("--kafka-sasl-mechanism aws-msk-iam needs --kafka-tls (MSK's IAM listener is TLS only)")
		}
	default:
		return fmt.Errorf("--kafka-sasl-mechanism %q: want plain, scram-sha-256, scram-sha-512 or aws-msk-iam", c.SASLMechanism)
	}
	return nil
}

// Opts validates c, reads the TLS files and the password once (so that a
// missing file fails now, not at the first connection) and returns the
// kgo options: kgo.DialTLSConfig and kgo.SASL. getenv is os.Getenv in
// production.
func (c Config) Opts(getenv func(string) string) ([]kgo.Opt, error) {
	if err := c.Validate(getenv); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	tc, err := c.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("kafka %w", err)
	}
	if tc != nil {
		// kgo sets ServerName per broker to the host dialed when empty.
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASLMechanism == "" {
		return opts, nil
	}
	m, err := c.mechanism(getenv)
	if err != nil {
		return nil, err
	}
	return append(opts, kgo.SASL(m)), nil
}

// mechanism builds the SASL mechanism; its credentials are read at each
// authentication (each new connection).
func (c Config) mechanism(getenv func(string) string) (sasl.Mechanism, error) {
	mech := strings.ToLower(c.SASLMechanism)
	password := func() (string, error) { return "", nil }
	if mech != MechanismAWSMSKIAM {
		read, err := connsec.Secret{File: c.SASLPasswordFile, Env: EnvSASLPassword}.Reader(getenv)
		if err != nil {
			return nil, fmt.Errorf("kafka sasl password: %w", err)
		}
		password = func() (string, error) {
			v, err := read()
			if err != nil {
				return "", fmt.Errorf("kafka sasl password: %w", err)
			}
			return v, nil
		}
	}
	user := c.SASLUser
	switch mech {
	case MechanismPlain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			p, err := password()
			return plain.Auth{User: user, Pass: p}, err
		}), nil
	case MechanismScramSHA256, MechanismScramSHA512:
		auth := func(context.Context) (scram.Auth, error) {
			p, err := password()
			return scram.Auth{User: user, Pass: p}, err
		}
		if strings.EqualFold(c.SASLMechanism, MechanismScramSHA256) {
			return scram.Sha256(auth), nil
		}
		return scram.Sha512(auth), nil
	case MechanismAWSMSKIAM:
		return aws.ManagedStreamingIAM(func(context.Context) (aws.Auth, error) {
			a := aws.Auth{AccessKey: getenv(EnvAWSAccessKeyID), SecretKey: getenv(EnvAWSSecretAccessKey), SessionToken: getenv(EnvAWSSessionToken)}
			if a.AccessKey == "" || a.SecretKey == "" {
				return a, fmt.Errorf("kafka aws-msk-iam: %s or %s is empty", EnvAWSAccessKeyID, EnvAWSSecretAccessKey)
			}
			return a, nil
		}), nil
	}
	return nil, fmt.Errorf("--kafka-sasl-mechanism %q: unknown", c.SASLMechanism)
}

// Describe says how c connects, for the start-up log: mechanism, user and
// where the password comes from, never the password.
func (c Config) Describe() []any {
	kv := []any{"kafka_tls", c.TLS.Enabled()}
	if c.SASLMechanism != "" {
		kv = append(kv, "kafka_sasl", strings.ToLower(c.SASLMechanism))
		if c.SASLUser != "" {
			kv = append(kv, "kafka_sasl_user", c.SASLUser)
		}
	}
	return kv
}
