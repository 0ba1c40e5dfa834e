package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"sigs.k8s.io/yaml"
)

// grafanaMounts are where compose puts dashboards/ in the Grafana
// container; the provisioning files of dashboards/ must agree.
var grafanaMounts = map[string]string{
	"dashboards/provisioning/datasources": "/etc/grafana/provisioning/datasources",
	"dashboards/provisioning/dashboards":  "/etc/grafana/provisioning/dashboards",
	"dashboards/json":                     "/var/lib/grafana/dashboards",
}

// checkGrafana: Grafana gets the ClickHouse plugin and dashboards/
// mounted; when dashboards/ exists, its datasources point at the stack's
// ClickHouse as resolverd writes it, and its dashboard provider reads the
// mounted JSON.
func checkGrafana(t *testing.T, g types.ServiceConfig, clickhouse types.ServiceConfig) {
	t.Helper()
	if !strings.Contains(env(g)["GF_PLUGINS_PREINSTALL"], "grafana-clickhouse-datasource") {
		t.Errorf("grafana does not install grafana-clickhouse-datasource")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	// Grafana's read-only ClickHouse user: its password is a secret of
	// both, ClickHouse runs the script that creates it.
	for _, s := range []types.ServiceConfig{g, clickhouse} {
		if !slices.ContainsFunc(s.Secrets, func(sc types.ServiceSecretConfig) bool { return sc.Source == "grafana_clickhouse_password" }) {
			t.Errorf("%s lacks the grafana_clickhouse_password secret", s.Name)
		}
	}
	if !slices.ContainsFunc(clickhouse.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Source == filepath.Join(root, "deploy/compose/clickhouse-initdb") && v.Target == "/docker-entrypoint-initdb.d" && v.ReadOnly
	}) {
		t.Error("clickhouse does not mount compose/clickhouse-initdb (Grafana's read-only user) at /docker-entrypoint-initdb.d")
	}
	for src, target := range grafanaMounts {
		found := false
		for _, v := range g.Volumes {
			if v.Source == filepath.Join(root, src) && v.Target == target && v.ReadOnly {
				found = true
			}
		}
		if !found {
			t.Errorf("grafana does not mount %s read-only at %s", src, target)
		}
	}
	t.Run("dashboards", func(t *testing.T) {
		checkDatasources(t, filepath.Join(root, "dashboards/provisioning/datasources"), clickhouse)
		checkProviders(t, filepath.Join(root, "dashboards/provisioning/dashboards"))
	})
}

func yamlFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no provisioning file in %s", dir)
	}
	return files
}

func checkDatasources(t *testing.T, dir string, clickhouse types.ServiceConfig) {
	var n int
	for _, f := range yamlFiles(t, dir) {
		var doc struct {
			Datasources []struct {
				Name, Type string
				JSONData   map[string]any    `json:"jsonData"`
				Secure     map[string]string `json:"secureJsonData"`
			} `json:"datasources"`
		}
		readYAML(t, f, &doc)
		for _, ds := range doc.Datasources {
			if ds.Type != "grafana-clickhouse-datasource" {
				continue
			}
			n++
			host := fmt.Sprint(ds.JSONData["host"])
			if host == "<nil>" {
				host = fmt.Sprint(ds.JSONData["server"])
			}
			port, proto := fmt.Sprint(ds.JSONData["port"]), fmt.Sprint(ds.JSONData["protocol"])
			wantPort := "9000"
			if proto == "http" {
				wantPort = "8123"
			}
			if host != "clickhouse" || port != wantPort {
				t.Errorf("%s: datasource %q reaches %s:%s (%s), want the stack's clickhouse:%s", f, ds.Name, host, port, proto, wantPort)
			}
			// Grafana reads as its read-only user, never the writer
			// (dashboards' TestGrafanaUser checks the user's SQL).
			if u := fmt.Sprint(ds.JSONData["username"]); u != "grafana" || u == env(clickhouse)["CLICKHOUSE_USER"] {
				t.Errorf("%s: datasource %q user %q, want grafana, the read-only user compose/clickhouse-initdb creates", f, ds.Name, u)
			}
			if db, ok := ds.JSONData["defaultDatabase"]; ok && db != "toolaudit" {
				t.Errorf("%s: datasource %q database %v, resolverd writes toolaudit", f, ds.Name, db)
			}
			if pw := ds.Secure["password"]; pw != "$__file{/run/secrets/grafana_clickhouse_password}" && !strings.HasPrefix(pw, "${") {
				t.Errorf("%s: datasource %q password %q: want $__file{/run/secrets/grafana_clickhouse_password} (the compose secret) or a variable", f, ds.Name, pw)
			}
		}
	}
	if n == 0 {
		t.Errorf("%s provisions no grafana-clickhouse-datasource", dir)
	}
}

func checkProviders(t *testing.T, dir string) {
	for _, f := range yamlFiles(t, dir) {
		var doc struct {
			Providers []struct {
				Name    string
				Options map[string]any `json:"options"`
			} `json:"providers"`
		}
		readYAML(t, f, &doc)
		for _, p := range doc.Providers {
			if path := fmt.Sprint(p.Options["path"]); !strings.HasPrefix(path, grafanaMounts["dashboards/json"]) {
				t.Errorf("%s: provider %q reads %s, compose mounts dashboards/json at %s", f, p.Name, path, grafanaMounts["dashboards/json"])
			}
		}
	}
}

// readYAML decodes file into v, leniently: Grafana's files have fields
// this test does not read.
func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}
