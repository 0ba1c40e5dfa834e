package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/bins"
	"github.com/toolaudit/toolaudit/internal/testkit/tlstest"
)

// TestClusterKill9: the exactly-once kill test through a two-shard
// ClickHouse cluster (two engines, remote_servers, no replicas): resolverd
// migrates the cluster layout, writes through the Distributed table, is
// killed with SIGKILL three times mid-stream, and every call has exactly
// one decision, read with FINAL through the Distributed table, with the
// calls spread over both shards.
func TestClusterKill9(t *testing.T) {
	t.Parallel() // its own broker and engine; mostly waiting on kills and outages
	c := load(t)
	srvs := chenginetest.SuperviseCluster(t, "two", 2)
	e := newEnv(t, srvs[0], 6)
	e.db = "e2e_cluster"
	for _, s := range srvs { // no Keeper, no ON CLUSTER: each server is migrated
		out, err := exec.Command(resolverd, "migrate", "--clickhouse", s.Addr(), "--database", e.db, "--cluster", "two", "--cluster-replicated=false").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "applied ") || strings.Contains(string(out), "applied 0 ") {
			t.Fatalf("migrate %s: %v\n%s", s.Addr(), err, out)
		}
	}
	cluster := []string{"--cluster", "two", "--cluster-replicated=false"}
	e.produce("tool-listings", c.listings, 0)
	done := make(chan struct{})
	go func() { defer close(done); e.produce("tool-calls", c.calls, 6*time.Second) }()
	for _, after := range []time.Duration{2500 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
		d := e.start(cluster...)
		d.waitLog(t, "partitions assigned", 30*time.Second) // see TestKill9
		time.Sleep(after)
		d.kill()
	}
	<-done
	d := e.start(cluster...)
	d.waitLog(t, "partitions assigned", 30*time.Second)
	e.waitDecided(len(c.calls), 90*time.Second)
	d.stop(t)
	e.check(c)
	var perShard []uint64
	for _, s := range srvs {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM "+e.db+".decisions_local FINAL").Scan(&n); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		perShard = append(perShard, n)
	}
	t.Logf("calls per shard: %v of %d", perShard, len(c.calls))
	if perShard[0] == 0 || perShard[1] == 0 || int(perShard[0]+perShard[1]) != len(c.calls) {
		t.Fatalf("shards hold %v calls, want %d over both", perShard, len(c.calls))
	}
}

var (
	ingestOnce sync.Once
	ingestBin  string
	ingestErr  error
)

// ingestBinary builds cmd/ingest once per test binary.
func ingestBinary(t *testing.T) string {
	t.Helper()
	ingestOnce.Do(func() {
		ingestBin, ingestErr = bins.Build("ingest", bins.Dev)
	})
	if ingestErr != nil {
		t.Fatal(ingestErr)
	}
	return ingestBin
}

// TestSecured: the whole path with every connection secured. Kafka (kfake)
// takes only TLS with client certificates and SCRAM-SHA-512; ClickHouse is
// reached through a TLS-terminating proxy that requires a client
// certificate (the embedded engine opens no secure port: its argv refuses
// --tcp_port_secure, and tcp_port_secure with an openSSL section in a
// configuration file opened none). ingest produces the corpus with its
// password in the environment, resolverd decides it with its password in
// a file, and every call has the decision `resolverd check` gives it.
// Then each wrong setting stops resolverd at start, within seconds, with
// an error that names what to check.
func TestSecured(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	certs := tlstest.New(t)
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "tool-calls"),
		kfake.SeedTopics(3, "tool-listings"), kfake.SeedTopics(1, "tool-calls-dlq"),
		kfake.TLS(certs.Server(true)), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "toolaudit", "kafka-s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	srv := chenginetest.Server(t)
	proxy := tlstest.NewProxy(t, certs.Server(true), srv.Addr())
	e := &env{t: t, brokers: k.ListenAddrs(), ch: srv, db: "e2e_secured"}

	dir := t.TempDir()
	write := func(name string, lines [][]byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kafkaPW := write("kafka-password", [][]byte{[]byte("kafka-s3cret")})
	kafkaTLS := []string{"--kafka-tls-ca", certs.CAFile, "--kafka-tls-cert", certs.ClientCertFile, "--kafka-tls-key", certs.ClientKeyFile,
		"--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-user", "toolaudit"}

	ingest := exec.Command(ingestBinary(t), append(append([]string{"--brokers", strings.Join(e.brokers, ","), "--format", "event"}, kafkaTLS...),
		write("listings.jsonl", c.listings), write("calls.jsonl", c.calls))...)
	ingest.Env = append(os.Environ(), "TOOLAUDIT_KAFKA_SASL_PASSWORD=kafka-s3cret")
	if out, err := ingest.CombinedOutput(); err != nil || !strings.Contains(string(out), fmt.Sprintf("tool-calls %d", len(c.calls))) {
		t.Fatalf("ingest: %v\n%s", err, out)
	}

	chTLS := []string{"--clickhouse", proxy.Addr(), "--clickhouse-tls-ca", certs.CAFile,
		"--clickhouse-tls-cert", certs.ClientCertFile, "--clickhouse-tls-key", certs.ClientKeyFile}
	good := append(append(append([]string{}, kafkaTLS...), "--kafka-sasl-password-file", kafkaPW), chTLS...)
	d := e.start(good...)
	e.waitDecided(len(c.calls), 60*time.Second)
	d.stop(t)
	e.check(c)
	if proxy.Handshakes() < 2 { // the INSERT pool (ch-go) and the pool of the rest (clickhouse-go)
		t.Fatalf("%d TLS connections reached ClickHouse through the proxy, want 2 or more", proxy.Handshakes())
	}
	log := d.log.String()
	if strings.Contains(log, "kafka-s3cret") {
		t.Fatal("the Kafka password is in resolverd's log")
	}

	wrongPW := write("wrong-password", [][]byte{[]byte("not-it")})
	otherCA := tlstest.New(t).CAFile
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong kafka password", append(append(append([]string{}, kafkaTLS...), "--kafka-sasl-password-file", wrongPW), chTLS...), "SASL"},
		{"no kafka client certificate", append([]string{"--kafka-tls-ca", certs.CAFile, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-user", "toolaudit", "--kafka-sasl-password-file", kafkaPW}, chTLS...), "TLS handshake"},
		{"kafka without tls", append([]string{"--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-user", "toolaudit", "--kafka-sasl-password-file", kafkaPW}, chTLS...), "closed the connection"},
		{"clickhouse ca unknown", append(append([]string{}, good...), "--clickhouse-tls-ca", otherCA), "certificate"},
		{"clickhouse without tls", append(append([]string{}, good...), "--clickhouse-tls-ca", "", "--clickhouse-tls-cert", "", "--clickhouse-tls-key", ""), "a TLS port?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := append([]string{"run", "--brokers", strings.Join(e.brokers, ","), "--clickhouse", srv.Addr(), "--database", e.db, "--http", ""}, tc.args...)
			start := time.Now()
			out, err := exec.CommandContext(ctx, resolverd, args...).CombinedOutput()
			took := time.Since(start)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), tc.want) {
				t.Fatalf("exit %v after %v, want 1 and %q:\n%s", err, took, tc.want, tail(string(out), 15))
			}
			if took > 15*time.Second {
				t.Fatalf("took %v to fail: a retry loop", took)
			}
			t.Logf("failed in %v: %s", took.Round(time.Millisecond), tail(strings.TrimSpace(string(out)), 1))
		})
	}
}
