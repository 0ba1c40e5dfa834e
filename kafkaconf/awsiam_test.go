package kafkaconf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/connsec"
	"github.com/toolaudit/toolaudit/internal/testkit/tlstest"
)

// awsChainEnv empties the process's AWS settings for the SDK's chain:
// no static keys, no profile files of the machine, no instance metadata
// (its address is not loopback), and a region for the signature.
func awsChainEnv(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		EnvAWSAccessKeyID: "", EnvAWSSecretAccessKey: "", EnvAWSSessionToken: "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "eu-west-1",
		"AWS_ROLE_ARN": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_CONTAINER_AUTHORIZATION_TOKEN": "",
	} {
		t.Setenv(k, v)
	}
}

// credentialServer hands out credentials whose access key is prefix and
// a counter, expiring awsExpiryWindow + 2 s from now: the SDK's cache
// refreshes them about two seconds later.
type credentialServer struct {
	*httptest.Server
	prefix string
	mu     sync.Mutex
	n      int
	issued map[string]bool
	deny   bool
}

func (s *credentialServer) next() (key string, expires time.Time) {
	s.n++
	key = fmt.Sprintf("%s%04d", s.prefix, s.n)
	s.issued[key] = true
	return key, time.Now().Add(awsExpiryWindow + 2*time.Second).UTC().Truncate(time.Second)
}

func (s *credentialServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// stsServer answers AssumeRoleWithWebIdentity for role with the token in
// tokenFile, as STS does (XML).
func stsServer(t *testing.T, role, token string) *credentialServer {
	s := &credentialServer{prefix: "ASIAWEBIDENTITY", issued: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := r.ParseForm(); err != nil || r.PostForm.Get("Action") != "AssumeRoleWithWebIdentity" {
			t.Errorf("STS request %v %v", r.PostForm, err)
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if s.deny || r.PostForm.Get("RoleArn") != role || r.PostForm.Get("WebIdentityToken") != token {
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error><RequestId>r</RequestId></ErrorResponse>`)
			return
		}
		key, exp := s.next()
		w.Header().Set("Content-Type", "text/xml")
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>
<Credentials><AccessKeyId>%s</AccessKeyId><SecretAccessKey>secret-%s</SecretAccessKey><SessionToken>session-%s</SessionToken><Expiration>%s</Expiration></Credentials>
<AssumedRoleUser><Arn>%s/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser></AssumeRoleWithWebIdentityResult>
<ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`, key, key, key, exp.Format(time.RFC3339), role)
	}))
	t.Cleanup(s.Close)
	return s
}

// containerServer is the container credentials endpoint of ECS and EKS
// Pod Identity (JSON), which wants the authorization token auth.
func containerServer(t *testing.T, auth string) *credentialServer {
	s := &credentialServer{prefix: "ASIACONTAINER", issued: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.deny || r.Header.Get("Authorization") != auth {
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": "AccessDenied", "message": "no role for this pod"})
			return
		}
		key, exp := s.next()
		_ = json.NewEncoder(w).Encode(map[string]string{"AccessKeyId": key, "SecretAccessKey": "secret-" + key, "Token": "session-" + key, "Expiration": exp.Format(time.RFC3339)})
	}))
	t.Cleanup(s.Close)
	return s
}

// mskBroker accepts AWS_MSK_IAM payloads signed for kafka-cluster:Connect
// with a session lifetime of lifetime: franz-go re-authenticates about a
// second before its end, each time with the chain's current credentials.
func mskBroker(t *testing.T, certs *tlstest.Set, lifetime time.Duration) *saslBroker {
	return startSASLBroker(t, "AWS_MSK_IAM", []kfake.Opt{kfake.TLS(certs.Server(false))}, func(msg []byte) (authn, []byte, time.Duration) {
		var p map[string]string
		if err := json.Unmarshal(msg, &p); err != nil {
			t.Errorf("AWS_MSK_IAM payload %q: %v", msg, err)
			return authn{refused: "not JSON"}, nil, 0
		}
		a := authn{payload: p}
		if p["action"] != "kafka-cluster:Connect" || p["x-amz-signature"] == "" || !strings.Contains(p["x-amz-credential"], "/eu-west-1/kafka-cluster/aws4_request") {
			a.refused = "not a signed Connect"
		}
		return a, []byte(`{"version":"2020_10_22","request-id":"r-1"}`), lifetime
	})
}

// TestMSKIAMCredentialChain: without static keys, aws-msk-iam signs with
// the SDK's chain: a web identity (EKS IRSA) exchanged at STS, or the
// container credentials endpoint; the broker sees the access key of the
// credentials current at each authentication, refreshed before they
// expire, the endpoint asked once per credentials, not per
// authentication. A refusal by STS or the container endpoint fails Check
// at once, naming the credential chain.
func TestMSKIAMCredentialChain(t *testing.T) {
	certs := tlstest.New(t)
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) *credentialServer
	}{
		{"web identity", func(t *testing.T) *credentialServer {
			const role = "arn:aws:iam::123456789012:role/toolaudit"
			file := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(file, []byte("eyJ.projected.sa-token"), 0o600); err != nil {
				t.Fatal(err)
			}
			s := stsServer(t, role, "eyJ.projected.sa-token")
			t.Setenv("AWS_ENDPOINT_URL_STS", s.URL)
			t.Setenv("AWS_ROLE_ARN", role)
			t.Setenv("AWS_ROLE_SESSION_NAME", "toolaudit-test")
			t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", file)
			return s
		}},
		{"container role", func(t *testing.T) *credentialServer {
			s := containerServer(t, "pod-identity-token")
			t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", s.URL+"/v1/credentials")
			t.Setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "pod-identity-token")
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			awsChainEnv(t)
			creds := tc.setup(t)
			b := mskBroker(t, certs, 1500*time.Millisecond)
			cfg := Config{SASLMechanism: "aws-msk-iam", TLS: connsec.TLS{CA: certs.CAFile}}
			cl := client(t, cfg, b.Cluster)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := cfg.Check(ctx, cl); err != nil {
				t.Fatalf("Check: %v", err)
			}
			for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("hello")}).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			}
			keys := map[string]bool{}
			authns := b.seen()
			for _, a := range authns {
				key, _, _ := strings.Cut(a.payload["x-amz-credential"], "/")
				creds.mu.Lock()
				ok := creds.issued[key]
				creds.mu.Unlock()
				if a.refused != "" || !ok || a.payload["x-amz-security-token"] != "session-"+key {
					t.Errorf("authentication with key %q (%s), token %q: not the chain's credentials", key, a.refused, a.payload["x-amz-security-token"])
				}
				keys[key] = true
			}
			fetched := creds.count()
			t.Logf("%d authentications, %d access keys, %d fetches", len(authns), len(keys), fetched)
			if len(keys) < 2 {
				t.Errorf("%d access keys over 4 s of credentials that expire (in the cache's view) after 2: not refreshed", len(keys))
			}
			if fetched >= len(authns) {
				t.Errorf("%d fetches for %d authentications: not cached", fetched, len(authns))
			}
		})
	}
	for _, deny := range []string{"sts", "container"} {
		t.Run("refused by "+deny, func(t *testing.T) {
			awsChainEnv(t)
			var s *credentialServer
			if deny == "sts" {
				file := filepath.Join(t.TempDir(), "token")
				if err := os.WriteFile(file, []byte("eyJ.other"), 0o600); err != nil {
					t.Fatal(err)
				}
				s = stsServer(t, "arn:aws:iam::123456789012:role/toolaudit", "eyJ.projected.sa-token")
				t.Setenv("AWS_ENDPOINT_URL_STS", s.URL)
				t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/toolaudit")
				t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", file)
			} else {
				s = containerServer(t, "pod-identity-token")
				s.deny = true
				t.Setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", s.URL+"/v1/credentials")
			}
			b := mskBroker(t, certs, 0)
			cfg := Config{SASLMechanism: "aws-msk-iam", TLS: connsec.TLS{CA: certs.CAFile}}
			cl := client(t, cfg, b.Cluster)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := cfg.Check(ctx, cl)
			var ce *CredentialsError
			if !errors.Is(err, ErrRefused) || !errors.As(err, &ce) || !strings.Contains(err.Error(), "AWS credential chain") ||
				!strings.Contains(err.Error(), "AccessDenied") || time.Since(start) > 3*time.Second {
				t.Fatalf("Check = %v after %v, want a refusal naming the credential chain", err, time.Since(start))
			}
			if len(b.seen()) != 0 {
				t.Errorf("the broker was sent a signature without credentials")
			}
			t.Logf("%v", err)
		})
	}
}
