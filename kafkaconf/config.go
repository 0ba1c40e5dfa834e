package kafkaconf

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/toolaudit/toolaudit/internal/connsec"
)

// EnvSASLPassword is the environment variable of the SASL password when
// --kafka-sasl-password-file is not given.
const EnvSASLPassword = "TOOLAUDIT_KAFKA_SASL_PASSWORD"

// The standard AWS variables of aws-msk-iam's static credentials; without
// them, aws-msk-iam takes the SDK's default credential chain.
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
	MechanismOAuthBearer = "oauthbearer"
)

const mechanisms = "plain, scram-sha-256, scram-sha-512, aws-msk-iam or oauthbearer"

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
	// OAuth is where oauthbearer gets its tokens.
	OAuth OAuth
	// Log gets the warnings of the mechanisms (a failed token refresh
	// while the current token is still valid); nil: slog.Default().
	Log *slog.Logger
}

// Register adds the --kafka-tls* and --kafka-sasl-* flags to fs.
func (c *Config) Register(fs *flag.FlagSet) {
	c.TLS.Register(fs, "kafka", "Kafka")
	fs.StringVar(&c.SASLMechanism, "kafka-sasl-mechanism", "", "SASL `MECHANISM` to authenticate to Kafka with: "+mechanisms+" (default: none)")
	fs.StringVar(&c.SASLUser, "kafka-sasl-user", "", "SASL `USER` of plain and SCRAM")
	fs.StringVar(&c.SASLPasswordFile, "kafka-sasl-password-file", "", "`FILE` holding the SASL password (default: the "+EnvSASLPassword+" variable, which other processes of the same user and root can read in /proc/PID/environ; never a flag value, which ps shows)")
	fs.StringVar(&c.OAuth.TokenURL, "kafka-sasl-oauth-token-url", "", "oauthbearer: the OAuth token endpoint's `URL` (https), asked for tokens by the client credentials grant")
	fs.StringVar(&c.OAuth.ClientID, "kafka-sasl-oauth-client-id", "", "oauthbearer: the OAuth client `ID`")
	fs.StringVar(&c.OAuth.ClientSecretFile, "kafka-sasl-oauth-client-secret-file", "", "oauthbearer: `FILE` holding the OAuth client secret (default: the "+EnvOAuthClientSecret+" variable, readable in /proc/PID/environ; never a flag value)")
	fs.StringVar(&c.OAuth.Scope, "kafka-sasl-oauth-scope", "", "oauthbearer: the `SCOPE` to ask the token for (space-separated; default: none)")
	fs.StringVar(&c.OAuth.ClientAuth, "kafka-sasl-oauth-client-auth", ClientAuthBasic, "oauthbearer: how the client authenticates to the token endpoint: basic (HTTP Basic) or post (client_id and client_secret in the form)")
	fs.Var(&c.OAuth.Extensions, "kafka-sasl-oauth-extension", "oauthbearer: SASL extensions `KEY=VALUE[,KEY=VALUE]` sent with the token, repeatable (Confluent Cloud: logicalCluster=lkc-...,identityPoolId=pool-...)")
}

// Enabled reports whether c asks for TLS or SASL.
func (c Config) Enabled() bool { return c.TLS.Enabled() || c.SASLMechanism != "" }

// Validate checks the flags' consistency without reading any file.
func (c Config) Validate(getenv func(string) string) error {
	pw := connsec.Secret{File: c.SASLPasswordFile, Env: EnvSASLPassword}
	mech := strings.ToLower(c.SASLMechanism)
	if mech != MechanismOAuthBearer && c.OAuth.given() {
		return errors.New("--kafka-sasl-oauth-* need --kafka-sasl-mechanism oauthbearer")
	}
	switch mech {
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
			return errors.New("--kafka-sasl-mechanism aws-msk-iam takes no user or password: it signs with AWS credentials (" + EnvAWSAccessKeyID + " and " + EnvAWSSecretAccessKey + ", or the AWS credential chain)")
		}
		if (getenv(EnvAWSAccessKeyID) == "") != (getenv(EnvAWSSecretAccessKey) == "") {
			return fmt.Errorf("--kafka-sasl-mechanism aws-msk-iam: static credentials need both %s and %s (or neither, for the AWS credential chain)", EnvAWSAccessKeyID, EnvAWSSecretAccessKey)
		}
		if !c.TLS.Enabled() {
			return errors.New("--kafka-sasl-mechanism aws-msk-iam needs --kafka-tls (MSK's IAM listener is TLS only)")
		}
	case MechanismOAuthBearer:
		if c.SASLUser != "" || c.SASLPasswordFile != "" {
			return errors.New("--kafka-sasl-mechanism oauthbearer takes no user or password: it authenticates with a token from --kafka-sasl-oauth-token-url")
		}
		if err := c.OAuth.validate(); err != nil {
			return err
		}
		if !(connsec.Secret{File: c.OAuth.ClientSecretFile, Env: EnvOAuthClientSecret}).Given(getenv) {
			return fmt.Errorf("--kafka-sasl-mechanism oauthbearer needs a client secret: --kafka-sasl-oauth-client-secret-file FILE or the %s variable", EnvOAuthClientSecret)
		}
	default:
		return fmt.Errorf("--kafka-sasl-mechanism %q: want %s", c.SASLMechanism, mechanisms)
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
	if mech == MechanismPlain || mech == MechanismScramSHA256 || mech == MechanismScramSHA512 {
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
		creds, err := awsCredentials(getenv)
		if err != nil {
			return nil, err
		}
		return aws.ManagedStreamingIAM(creds), nil
	case MechanismOAuthBearer:
		read, err := connsec.Secret{File: c.OAuth.ClientSecretFile, Env: EnvOAuthClientSecret}.Reader(getenv)
		if err != nil {
			return nil, fmt.Errorf("kafka oauth client secret: %w", err)
		}
		log := c.Log
		if log == nil {
			log = slog.Default()
		}
		ts, err := newTokenSource(c.OAuth, read, log)
		if err != nil {
			return nil, err
		}
		ext := maps.Clone(c.OAuth.Extensions)
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			tok, err := ts.Token(ctx)
			return oauth.Auth{Token: tok, Extensions: ext}, err
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
		if c.OAuth.TokenURL != "" {
			if u, err := tokenURL(c.OAuth.TokenURL); err == nil {
				kv = append(kv, "kafka_sasl_oauth_token_url", shownURL(u), "kafka_sasl_oauth_client_id", c.OAuth.ClientID)
			}
		}
	}
	return kv
}
