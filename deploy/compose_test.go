package deploy

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

// loadCompose loads compose/compose.yaml as `docker compose` does, into
// compose-go's typed project: the Compose schema is enforced (an unknown
// key or a mistyped value fails), anchors, interpolation and paths are
// resolved. The passwords come from the environment (.env in use).
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"compose/compose.yaml"},
		cli.WithEnv([]string{"TOOLAUDIT_CLICKHOUSE_PASSWORD=test-password", "TOOLAUDIT_GRAFANA_ADMIN_PASSWORD=test-admin", "TOOLAUDIT_GRAFANA_CLICKHOUSE_PASSWORD=testgrafana"}),
		cli.WithDiscardEnvFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return p
}

func env(s types.ServiceConfig) map[string]string {
	m := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			m[k] = *v
		}
	}
	return m
}

// topicPlan is the topic job's TOPICS: name -> partitions and configs.
type topic struct {
	partitions int
	configs    map[string]string
}

func topicPlan(t *testing.T, s types.ServiceConfig) map[string]topic {
	t.Helper()
	plan := map[string]topic{}
	for _, spec := range strings.Fields(env(s)["TOPICS"]) {
		parts := strings.SplitN(spec, ":", 3)
		if len(parts) != 3 {
			t.Fatalf("topic spec %q is not NAME:PARTITIONS:CONFIGS", spec)
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil || n < 1 {
			t.Fatalf("topic spec %q: partitions", spec)
		}
		cfg := map[string]string{}
		for _, kv := range strings.Split(parts[2], ",") {
			k, v, _ := strings.Cut(kv, "=")
			cfg[k] = v
		}
		plan[parts[0]] = topic{n, cfg}
	}
	return plan
}

// TestCompose: the compose stack loads, and what its services say of each
// other agrees: resolverd's variables are flags of `resolverd run --help`,
// its brokers and ClickHouse are services of the stack on the ports they
// listen on, the topics it reads are the ones the job creates (listings
// kept forever), Prometheus scrapes each replica's --http port, and the
// secrets are files.
func TestCompose(t *testing.T) {
	p := loadCompose(t)
	run := helpFlags(t, "resolverd", "run")
	svc := func(name string) types.ServiceConfig {
		s, ok := p.Services[name]
		if !ok {
			t.Fatalf("no service %s", name)
		}
		return s
	}
	kafka, clickhouse, topics := svc("kafka"), svc("clickhouse"), topicPlan(t, svc("kafka-topics"))

	var replicas []string
	for name, s := range p.Services {
		if !strings.HasPrefix(name, "resolverd") {
			continue
		}
		replicas = append(replicas, name)
		e := env(s)
		checkEnv(t, name, e, "RESOLVERD_", run)
		if len(s.Command) == 0 || s.Command[0] != "run" {
			t.Errorf("%s: command %v, want run", name, s.Command)
		}
		if !s.ReadOnly || s.User != "65532:65532" {
			t.Errorf("%s: read_only %v user %q, want a read-only root filesystem as 65532", name, s.ReadOnly, s.User)
		}

		host, port := splitAddr(t, setting(e, "RESOLVERD_", run, "brokers"))
		if host != "kafka" || !strings.Contains(env(kafka)["KAFKA_ADVERTISED_LISTENERS"], "://kafka:"+port) {
			t.Errorf("%s: brokers kafka:%s is no advertised listener of kafka (%s)", name, port, env(kafka)["KAFKA_ADVERTISED_LISTENERS"])
		}
		host, port = splitAddr(t, setting(e, "RESOLVERD_", run, "clickhouse"))
		if host != "clickhouse" || port != "9000" {
			t.Errorf("%s: clickhouse %s:%s, want clickhouse:9000 (the server's native port)", name, host, port)
		}
		if u := setting(e, "RESOLVERD_", run, "clickhouse-user"); u != env(clickhouse)["CLICKHOUSE_USER"] {
			t.Errorf("%s: user %q, the server creates %q", name, u, env(clickhouse)["CLICKHOUSE_USER"])
		}
		pwFile := setting(e, "RESOLVERD_", run, "clickhouse-password-file")
		if !slices.ContainsFunc(s.Secrets, func(sc types.ServiceSecretConfig) bool { return "/run/secrets/"+sc.Source == pwFile }) {
			t.Errorf("%s: --clickhouse-password-file %q is no secret of the service", name, pwFile)
		}

		for _, f := range []string{"calls-topic", "listings-topic", "dlq-topic"} {
			tp := setting(e, "RESOLVERD_", run, f)
			if _, ok := topics[tp]; !ok {
				t.Errorf("%s: --%s %s is not created by kafka-topics", name, f, tp)
			}
		}
		if l := topics[setting(e, "RESOLVERD_", run, "listings-topic")]; l.configs["retention.ms"] != "-1" || l.configs["retention.bytes"] != "-1" || l.configs["cleanup.policy"] != "delete" {
			t.Errorf("the listings topic must be kept whole and not compacted: %v", l.configs)
		}

		_, httpPort := splitAddr(t, setting(e, "RESOLVERD_", run, "http"))
		if len(s.Ports) != 1 || strconv.Itoa(int(s.Ports[0].Target)) != httpPort || s.Ports[0].HostIP != "127.0.0.1" {
			t.Errorf("%s: ports %+v, want --http's %s published on 127.0.0.1", name, s.Ports, httpPort)
		}
		scrapes(t, name+":"+httpPort)
	}
	slices.Sort(replicas)
	if len(replicas) != 2 {
		t.Fatalf("resolverd services %v, want two replicas", replicas)
	}
	if n := topics["tool-calls"].partitions; n < len(replicas) {
		t.Errorf("tool-calls has %d partitions for %d replicas: some would idle", n, len(replicas))
	}
	for _, tp := range []string{"tool-audit", "tool-decisions"} { // wave2-design: --audit-topic, --decisions-topic
		if _, ok := topics[tp]; !ok {
			t.Errorf("kafka-topics does not create %s", tp)
		}
	}
	// The approvals topic: one order of events (the baseline version), the
	// last verdict of each definition kept.
	if a, ok := topics["tool-approvals"]; !ok || a.partitions != 1 || a.configs["cleanup.policy"] != "compact" {
		t.Errorf("tool-approvals: %+v (created %v), want 1 partition, compacted", a, ok)
	}
	// The host's ingest reaches the broker through the EXTERNAL listener.
	ingest := helpFlags(t, "ingest")
	if _, ok := ingest["brokers"]; !ok || !strings.Contains(env(kafka)["KAFKA_ADVERTISED_LISTENERS"], "EXTERNAL://127.0.0.1:29092") {
		t.Errorf("ingest on the host has no listener at 127.0.0.1:29092")
	}
	published := map[string]bool{}
	for _, s := range p.Services {
		for _, pc := range s.Ports {
			key := pc.HostIP + ":" + pc.Published
			if pc.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s beyond loopback", s.Name, key)
			}
			if published[key] {
				t.Errorf("%s published twice", key)
			}
			published[key] = true
		}
	}
	if p.Secrets["clickhouse_password"].Environment != "TOOLAUDIT_CLICKHOUSE_PASSWORD" {
		t.Errorf("the ClickHouse password secret comes from %+v, want the TOOLAUDIT_CLICKHOUSE_PASSWORD variable", p.Secrets["clickhouse_password"])
	}
	checkGrafana(t, p.Services["grafana"], clickhouse)
}

func splitAddr(t *testing.T, addr string) (string, string) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return h, p
}

// prometheusConfig is the part of prometheus.yml the cross-check reads.
type prometheusConfig struct {
	ScrapeConfigs []struct {
		JobName       string `json:"job_name"`
		MetricsPath   string `json:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `json:"targets"`
		} `json:"static_configs"`
	} `json:"scrape_configs"`
}

// scrapes fails t unless prometheus.yml scrapes /metrics at target.
func scrapes(t *testing.T, target string) {
	t.Helper()
	var c prometheusConfig
	readYAML(t, "compose/prometheus.yml", &c)
	for _, sc := range c.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			if slices.Contains(st.Targets, target) && (sc.MetricsPath == "" || sc.MetricsPath == "/metrics") {
				return
			}
		}
	}
	t.Errorf("prometheus.yml does not scrape %s/metrics", target)
}

// TestPromtool: promtool (Debian's prometheus package) accepts the
// Prometheus configuration.
func TestPromtool(t *testing.T) {
	path := need.Tool(t, "promtool", "apt-get install prometheus (.ci/run does)")
	out, err := exec.Command(path, "check", "config", filepath.Join("compose", "prometheus.yml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
}
