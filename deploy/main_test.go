package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/bins"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

// bin holds resolverd and ingest built from this checkout, as every
// test run's other users of them do (bins.Dev: built once per run).
var bin string

func TestMain(m *testing.M) {
	for _, cmd := range []string{"resolverd", "ingest"} {
		p, err := bins.Build(cmd, bins.Dev)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		bin = filepath.Dir(p)
	}
	leakcheck.Main(m)
}

// flagSet is what a command's --help says: each flag with its default
// ("" for none: an upper-case placeholder).
type flagSet map[string]string

// helpFlags runs the real binary's --help and reads its FLAGS section.
func helpFlags(t *testing.T, args ...string) flagSet {
	t.Helper()
	out, _ := exec.Command(filepath.Join(bin, args[0]), append(args[1:], "--help")...).CombinedOutput()
	fs := flagSet{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "  -") {
			continue
		}
		f := strings.Fields(line)
		name, def, isBool := strings.Cut(strings.TrimPrefix(f[0], "-"), "=")
		if !isBool {
			def = ""
			if len(f) > 1 && f[1] != strings.ToUpper(f[1]) {
				def = f[1]
			} else if len(f) > 1 && strings.ContainsAny(f[1], "0123456789.:") {
				def = f[1] // numbers and addresses have no case
			}
		}
		fs[name] = def
	}
	if len(fs) < 10 {
		t.Fatalf("%v --help lists %d flags:\n%s", args, len(fs), out)
	}
	return fs
}

// envFlag maps RESOLVERD_FOO_BAR to foo-bar for prefix RESOLVERD_.
func envFlag(prefix, env string) (string, bool) {
	if !strings.HasPrefix(env, prefix) {
		return "", false
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, prefix)), "_", "-"), true
}

// secretEnv are the fixed variables commands read directly, not flags.
var secretEnv = map[string]bool{
	"TOOLAUDIT_KAFKA_SASL_PASSWORD": true,
	"TOOLAUDIT_CLICKHOUSE_PASSWORD": true,
}

// checkEnv fails t for every RESOLVERD_/INGEST_ variable of env that
// names no flag of the command's --help.
func checkEnv(t *testing.T, where string, env map[string]string, prefix string, flags flagSet) {
	t.Helper()
	for k := range env {
		if secretEnv[k] {
			continue
		}
		name, ok := envFlag(prefix, k)
		if !ok {
			t.Errorf("%s: variable %s is neither %s<FLAG> nor a known secret variable", where, k, prefix)
			continue
		}
		if _, ok := flags[name]; ok {
			continue
		}
		t.Errorf("%s: %s names --%s, which `--help` does not list", where, k, name)
	}
}

// setting is the value a flag takes from env, else its default.
func setting(env map[string]string, prefix string, flags flagSet, name string) string {
	if v, ok := env[prefix+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))]; ok {
		return v
	}
	return flags[name]
}
