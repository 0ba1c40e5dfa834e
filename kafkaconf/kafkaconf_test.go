package kafkaconf

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/connsec"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/internal/testkit/tlstest"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// broker is how a test's kfake cluster is secured.
type broker struct {
	tls        bool
	clientAuth bool
	sasl       [][3]string // mechanism, user, password of superusers
}

func (b broker) start(t *testing.T, certs *tlstest.Set) *kfake.Cluster {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "t")}
	if b.tls {
		opts = append(opts, kfake.TLS(certs.Server(b.clientAuth)))
	}
	if len(b.sasl) > 0 {
		opts = append(opts, kfake.EnableSASL())
		for _, s := range b.sasl {
			opts = append(opts, kfake.Superuser(s[0], s[1], s[2]))
		}
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func secretFile(t *testing.T, v string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestConnect: each security setting against a kfake broker secured the
// same way or not: the right ones produce and consume a record, the wrong
// ones fail Check at once with ErrRefused (not after the timeout).
func TestConnect(t *testing.T) {
	certs := tlstest.New(t)
	otherCA := tlstest.New(t).CAFile
	caOnly := connsec.TLS{CA: certs.CAFile}
	mtls := connsec.TLS{CA: certs.CAFile, Cert: certs.ClientCertFile, Key: certs.ClientKeyFile}
	plainUser := [][3]string{{"PLAIN", "ingest", "pl41n"}}
	scram256 := [][3]string{{"SCRAM-SHA-256", "resolverd", "s3cret-256"}}
	scram512 := [][3]string{{"SCRAM-SHA-512", "resolverd", "s3cret-512"}}
	for _, tc := range []struct {
		name    string
		broker  broker
		cfg     Config
		env     map[string]string
		refused string // "": connects; else a word of the hint
	}{
		{name: "plaintext", broker: broker{}, cfg: Config{}},
		{name: "tls ca file", broker: broker{tls: true}, cfg: Config{TLS: caOnly}},
		{name: "tls server name", broker: broker{tls: true}, cfg: Config{TLS: connsec.TLS{CA: certs.CAFile, ServerName: tlstest.ServerName}}},
		{name: "mutual tls", broker: broker{tls: true, clientAuth: true}, cfg: Config{TLS: mtls}},
		{name: "sasl plain", broker: broker{sasl: plainUser}, cfg: Config{SASLMechanism: "plain", SASLUser: "ingest", SASLPasswordFile: "pl41n"}},
		{name: "scram-sha-256 env password", broker: broker{sasl: scram256}, cfg: Config{SASLMechanism: "scram-sha-256", SASLUser: "resolverd"}, env: map[string]string{EnvSASLPassword: "s3cret-256"}},
		{name: "scram-sha-512 over mutual tls", broker: broker{tls: true, clientAuth: true, sasl: scram512}, cfg: Config{TLS: mtls, SASLMechanism: "SCRAM-SHA-512", SASLUser: "resolverd", SASLPasswordFile: "s3cret-512"}},

		{name: "unknown ca", broker: broker{tls: true}, cfg: Config{TLS: connsec.TLS{CA: otherCA}}, refused: "certificate"},
		{name: "system cas", broker: broker{tls: true}, cfg: Config{TLS: connsec.TLS{Enable: true}}, refused: "certificate"},
		{name: "wrong server name", broker: broker{tls: true}, cfg: Config{TLS: connsec.TLS{CA: certs.CAFile, ServerName: "kafka.example"}}, refused: "certificate"},
		{name: "plaintext to a tls broker", broker: broker{tls: true}, cfg: Config{}, refused: "closed the connection"},
		{name: "no client certificate", broker: broker{tls: true, clientAuth: true}, cfg: Config{TLS: caOnly}, refused: "rejected the TLS handshake"},
		{name: "wrong plain password", broker: broker{sasl: plainUser}, cfg: Config{SASLMechanism: "plain", SASLUser: "ingest", SASLPasswordFile: "wrong"}, refused: "during SASL authentication"},
		{name: "wrong scram password", broker: broker{sasl: scram256}, cfg: Config{SASLMechanism: "scram-sha-256", SASLUser: "resolverd", SASLPasswordFile: "wrong"}, refused: "during SASL authentication"},
		{name: "unknown scram user", broker: broker{tls: true, sasl: scram512}, cfg: Config{TLS: caOnly, SASLMechanism: "scram-sha-512", SASLUser: "nobody", SASLPasswordFile: "s3cret-512"}, refused: "during SASL authentication"},
		{name: "mechanism the user lacks", broker: broker{sasl: scram512}, cfg: Config{SASLMechanism: "scram-sha-256", SASLUser: "resolverd", SASLPasswordFile: "s3cret-512"}, refused: "SASL"},
		{name: "no sasl to a sasl broker", broker: broker{sasl: scram256}, cfg: Config{}, refused: "closed the connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.broker.start(t, certs)
			cfg := tc.cfg
			if cfg.SASLPasswordFile != "" {
				cfg.SASLPasswordFile = secretFile(t, cfg.SASLPasswordFile+"\n")
			}
			opts, err := cfg.Opts(env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers(c.ListenAddrs()...),
				kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err = tc.cfg.Check(ctx, cl)
			if tc.refused != "" {
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("Check = %v, want ErrRefused saying %q", err, tc.refused)
				}
				if d := time.Since(start); d > 3*time.Second {
					t.Fatalf("Check took %v to refuse: a retry loop", d)
				}
				t.Logf("refused as wanted: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("hello")}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				t.Fatalf("fetch: %v", err)
			}
			if rs := fs.Records(); len(rs) != 1 || string(rs[0].Value) != "hello" {
				t.Fatalf("consumed %d records", len(rs))
			}
		})
	}
}

// TestCheckWaitsForABroker: a broker not listening yet is waited for,
// within the caller's deadline, and the error says so.
func TestCheckWaitsForABroker(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = Config{}.Check(ctx, cl)
	if err == nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "no Kafka broker answered") {
		t.Fatalf("Check = %v", err)
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Fatalf("gave up after %v, before the deadline", d)
	}
}

// TestPasswordFileReread: the password file is read at each
// authentication: a client refused with a stale password connects once
// the file holds the new one, without being rebuilt.
func TestPasswordFileReread(t *testing.T) {
	c := broker{sasl: [][3]string{{"SCRAM-SHA-256", "u", "new"}}}.start(t, nil)
	file := secretFile(t, "old")
	cfg := Config{SASLMechanism: "scram-sha-256", SASLUser: "u", SASLPasswordFile: file}
	cl := client(t, cfg, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cfg.Check(ctx, cl); !errors.Is(err, ErrRefused) {
		t.Fatalf("stale password: Check = %v", err)
	}
	if err := os.WriteFile(file, []byte("new\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Check(ctx, cl); err != nil {
		t.Fatalf("rotated password: %v", err)
	}
}

// TestValidate: inconsistent flags are refused before any connection,
// and the messages name the flags.
func TestValidate(t *testing.T) {
	pw := secretFile(t, "p")
	for _, tc := range []struct {
		name string
		cfg  Config
		env  map[string]string
		want string // "" valid
	}{
		{"none", Config{}, nil, ""},
		{"user without mechanism", Config{SASLUser: "u"}, nil, "need --kafka-sasl-mechanism"},
		{"unknown mechanism", Config{SASLMechanism: "gssapi", SASLUser: "u", SASLPasswordFile: pw}, nil, "want plain"},
		{"scram without user", Config{SASLMechanism: "scram-sha-512", SASLPasswordFile: pw}, nil, "needs --kafka-sasl-user"},
		{"plain without password", Config{SASLMechanism: "plain", SASLUser: "u"}, nil, EnvSASLPassword},
		{"plain with env password", Config{SASLMechanism: "plain", SASLUser: "u"}, map[string]string{EnvSASLPassword: "p"}, ""},
		{"both password sources", Config{SASLMechanism: "plain", SASLUser: "u", SASLPasswordFile: pw}, map[string]string{EnvSASLPassword: "p"}, "keep one"},
		{"missing password file", Config{SASLMechanism: "plain", SASLUser: "u", SASLPasswordFile: pw + ".absent"}, nil, "no such file"},
		{"cert without key", Config{TLS: connsec.TLS{Cert: pw}}, nil, "both"},
		{"ca not pem", Config{TLS: connsec.TLS{CA: pw}}, nil, "no PEM certificate"},
		{"msk iam without tls", Config{SASLMechanism: "aws-msk-iam"}, map[string]string{EnvAWSAccessKeyID: "a", EnvAWSSecretAccessKey: "s"}, "needs --kafka-tls"},
		{"msk iam with the credential chain", Config{SASLMechanism: "aws-msk-iam", TLS: connsec.TLS{Enable: true}}, nil, ""},
		{"msk iam with half a static key", Config{SASLMechanism: "aws-msk-iam", TLS: connsec.TLS{Enable: true}}, map[string]string{EnvAWSAccessKeyID: "a"}, EnvAWSSecretAccessKey},
		{"oauth flags without oauthbearer", Config{SASLMechanism: "plain", SASLUser: "u", SASLPasswordFile: pw, OAuth: OAuth{Scope: "s"}}, nil, "need --kafka-sasl-mechanism oauthbearer"},
		{"oauthbearer", Config{SASLMechanism: "oauthbearer", OAuth: OAuth{TokenURL: "https://idp.example/oauth2/token", ClientID: "c", ClientSecretFile: pw}}, nil, ""},
		{"oauthbearer env secret", Config{SASLMechanism: "OAUTHBEARER", OAuth: OAuth{TokenURL: "http://127.0.0.1:8080/token", ClientID: "c"}}, map[string]string{EnvOAuthClientSecret: "p"}, ""},
		{"oauthbearer without url", Config{SASLMechanism: "oauthbearer", OAuth: OAuth{ClientID: "c", ClientSecretFile: pw}}, nil, "needs --kafka-sasl-oauth-token-url"},
		{"oauthbearer without client id", Config{SASLMechanism: "oauthbearer", OAuth: OAuth{TokenURL: "https://idp.example/t", ClientSecretFile: pw}}, nil, "--kafka-sasl-oauth-client-id"},
		{"oauthbearer without secret", Config{SASLMechanism: "oauthbearer", OAuth: OAuth{TokenURL: "https://idp.example/t", ClientID: "c"}}, nil, EnvOAuthClientSecret},
		{"oauthbearer over http", Config{SASLMechanism: "oauthbearer", OAuth: OAuth{TokenURL: "http://idp.example/t", ClientID: "c", ClientSecretFile: pw}}, nil, "clear text"},
		{"oauthbearer url with user", Config{SASLMechanism: "oauthbearer", OAuth: OAuth{TokenURL: "https://c:p@idp.example/t", ClientID: "c", ClientSecretFile: pw}}, nil, "no user information"},
		{"oauthbearer relative url", Config{SASLMechanism: "oauthbearer", OAuth: OAuth{TokenURL: "/t", ClientID: "c", ClientSecretFile: pw}}, nil, "https://"},
		{"oauthbearer bad client auth", Config{SASLMechanism: "oauthbearer", OAuth: OAuth{TokenURL: "https://idp.example/t", ClientID: "c", ClientSecretFile: pw, ClientAuth: "jwt"}}, nil, "basic or post"},
		{"oauthbearer with a user", Config{SASLMechanism: "oauthbearer", SASLUser: "u", OAuth: OAuth{TokenURL: "https://idp.example/t", ClientID: "c", ClientSecretFile: pw}}, nil, "no user"},
		{"msk iam with a user", Config{SASLMechanism: "aws-msk-iam", SASLUser: "u", TLS: connsec.TLS{Enable: true}}, map[string]string{EnvAWSAccessKeyID: "a", EnvAWSSecretAccessKey: "s"}, "no user"},
		{"msk iam", Config{SASLMechanism: "aws-msk-iam", TLS: connsec.TLS{Enable: true}}, map[string]string{EnvAWSAccessKeyID: "a", EnvAWSSecretAccessKey: "s"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.Opts(env(tc.env))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Opts: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Opts = %v, want an error saying %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "p\n") {
				t.Fatalf("error shows the password: %v", err)
			}
		})
	}
}

// TestMSKIAMSigns: aws-msk-iam's first message is MSK's signed JSON
// payload, signed with the variables' key for the broker's host.
func TestMSKIAMSigns(t *testing.T) {
	vars := map[string]string{EnvAWSAccessKeyID: "AKIDTOOLAUDITTEST", EnvAWSSecretAccessKey: "secret", EnvAWSSessionToken: "tok"}
	m, err := Config{SASLMechanism: "aws-msk-iam", TLS: connsec.TLS{Enable: true}}.mechanism(env(vars))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "AWS_MSK_IAM" {
		t.Fatalf("mechanism %s", m.Name())
	}
	_, first, err := m.Authenticate(context.Background(), "b-1.cluster.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil {
		t.Fatal(err)
	}
	var msg map[string]string
	if err := json.Unmarshal(first, &msg); err != nil {
		t.Fatalf("first message %q: %v", first, err)
	}
	if msg["action"] != "kafka-cluster:Connect" || !strings.HasPrefix(msg["x-amz-credential"], "AKIDTOOLAUDITTEST/") ||
		msg["x-amz-security-token"] != "tok" || msg["x-amz-signature"] == "" || msg["host"] != "b-1.cluster.kafka.eu-west-1.amazonaws.com" {
		t.Fatalf("first message %v", msg)
	}
	if strings.Contains(string(first), "secret") {
		t.Fatal("the secret key is in the message")
	}
}

// TestTLSToPlaintext: a TLS client at a plaintext listener may wait for a
// handshake forever (kfake does not close, Kafka does): Check gives up at
// the caller's deadline and says what that usually means.
func TestTLSToPlaintext(t *testing.T) {
	certs := tlstest.New(t)
	c := broker{}.start(t, certs)
	cfg := Config{TLS: connsec.TLS{CA: certs.CAFile}}
	cl := client(t, cfg, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := cfg.Check(ctx, cl); err == nil || !strings.Contains(err.Error(), "plaintext listener") {
		t.Fatalf("Check = %v", err)
	}
}

// client is a client of cluster c with cfg's options and more, closed at
// the end of the test.
func client(t *testing.T, cfg Config, c *kfake.Cluster, more ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts, err := cfg.Opts(os.Getenv)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append(append(opts, kgo.SeedBrokers(c.ListenAddrs()...)), more...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestRefusal: the errors a real Kafka broker answers with (which kfake,
// closing the connection instead, does not produce) are refusals; the
// transient ones are not.
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string // "" not a refusal
	}{
		{fmt.Errorf("sasl: %w", kerr.SaslAuthenticationFailed), "SASL authentication failed"},
		{kerr.UnsupportedSaslMechanism, "SASL mechanism"},
		{kerr.TopicAuthorizationFailed, "not authorized"},
		{&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, "rejected the TLS handshake"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "does not speak TLS"},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, ""},
		{kerr.NotLeaderForPartition, ""},
		{io.EOF, ""},
		{context.DeadlineExceeded, ""},
	} {
		if got := refusal(tc.err, ""); (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("refusal(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestLogger: the client is asked for its warnings and errors, and for
// everything when slog is at debug level; each line reaches slog at its
// level.
func TestLogger(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  kgo.LogLevel
		lines int // of the four logged below
	}{
		{slog.LevelInfo, kgo.LogLevelWarn, 3},
		{slog.LevelDebug, kgo.LogLevelDebug, 4},
	} {
		var b strings.Builder
		l := Logger(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: tc.level})))
		if l.Level() != tc.want {
			t.Errorf("slog %v: kgo level %v, want %v", tc.level, l.Level(), tc.want)
		}
		for _, lv := range []kgo.LogLevel{kgo.LogLevelError, kgo.LogLevelWarn, kgo.LogLevelInfo, kgo.LogLevelDebug} {
			l.Log(lv, "m", "broker", 1)
		}
		if n := strings.Count(b.String(), `msg="kafka: m" broker=1`); n != tc.lines {
			t.Errorf("slog %v: %d lines, want %d:\n%s", tc.level, n, tc.lines, b.String())
		}
	}
}

// TestBrokers: --brokers is declared with the command's default and note,
// and lists the seeds, blanks and empty items left out.
func TestBrokers(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{nil, []string{DefaultBrokers}},
		{[]string{"--brokers", " a:1, ,b:2 ,"}, []string{"a:1", "b:2"}},
		{[]string{"--brokers", ""}, nil},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		var b Brokers
		b.Register(fs, DefaultBrokers, "empty: no Kafka")
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if got := b.List(); !slices.Equal(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.args, got, tt.want)
		}
	}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var b Brokers
	b.Register(fs, "", "required")
	if u := fs.Lookup("brokers").Usage; u != "Kafka seed `BROKERS` (host:port), comma-separated (required)" {
		t.Errorf("usage %q", u)
	}
}
