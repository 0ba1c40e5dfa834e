package deploy

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/bins"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct{ cmd, args string }

func dockerfile(t *testing.T) [][]instruction {
	t.Helper()
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages [][]instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("%s before FROM", in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	return stages
}

// TestDockerfile: a multi-stage build whose last stage is distroless
// static (no shell, no libc) with nothing run in it, the binaries built
// without cgo, the image's user the one compose and Kubernetes run as,
// its port resolverd's --http port there; and the build's command, run
// here, makes a static binary.
func TestDockerfile(t *testing.T) {
	stages := dockerfile(t)
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(final[0].args, "gcr.io/distroless/static") || !strings.HasSuffix(final[0].args, ":nonroot") {
		t.Errorf("runtime stage FROM %s: want gcr.io/distroless/static...:nonroot (no shell, no libc)", final[0].args)
	}
	var buildCmd string
	for _, in := range build {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			buildCmd = in.args
		}
	}
	if !strings.Contains(buildCmd, "CGO_ENABLED=0") || !strings.Contains(buildCmd, "-tags nochengine") || !strings.Contains(buildCmd, "./cmd/resolverd") || !strings.Contains(buildCmd, "./cmd/ingest") {
		t.Errorf("build command %q: want CGO_ENABLED=0 go build -tags nochengine of ./cmd/resolverd and ./cmd/ingest", buildCmd)
	}
	got := map[string]string{}
	for _, in := range final[1:] {
		switch in.cmd {
		case "RUN", "SHELL", "ADD":
			t.Errorf("runtime stage has %s %s: it has no shell, and what it holds comes from the build stage", in.cmd, in.args)
		default:
			got[in.cmd] = in.args
		}
	}
	if got["USER"] != "65532:65532" {
		t.Errorf("USER %q, want 65532:65532 (compose's user and Kubernetes' runAsUser)", got["USER"])
	}
	var entry, cmd []string
	if err := json.Unmarshal([]byte(got["ENTRYPOINT"]), &entry); err != nil || !slices.Equal(entry, []string{"/usr/local/bin/resolverd"}) {
		t.Errorf("ENTRYPOINT %s: want the exec form of /usr/local/bin/resolverd", got["ENTRYPOINT"])
	}
	if err := json.Unmarshal([]byte(got["CMD"]), &cmd); err != nil || !slices.Equal(cmd, []string{"run"}) {
		t.Errorf("CMD %s: want [\"run\"]", got["CMD"])
	}
	_, httpPort := splitAddr(t, env(loadCompose(t).Services["resolverd-1"])["RESOLVERD_HTTP"])
	if got["EXPOSE"] != httpPort {
		t.Errorf("EXPOSE %s, resolverd listens on %s", got["EXPOSE"], httpPort)
	}

	// The build command's binary is static: no interpreter, no shared
	// library. (Without -tags nochengine it is not: purego, which loads
	// the embedded engine, links the C library even without cgo.) It says
	// so when asked for the embedded engine. Built as bins.Image: the
	// command's flags but -trimpath, which changes no linking and would
	// compile every package again.
	out := bins.Path(t, "resolverd", bins.Image)
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary names a dynamic loader: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v", libs)
	}
	b, err := exec.Command(out, "stack", "--dir", t.TempDir(), "--kafka-port", "0", "--clickhouse-port", "0", "--clickhouse-http-port", "0").CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(b), "built without the embedded engine") {
		t.Errorf("resolverd stack in the image's build: %v\n%s", err, b)
	}
}

// TestDockerignore: the build context the ignore file leaves holds every
// file the build compiles or embeds (ignoring a package's directory
// would fail the build only where a Docker engine runs, not here).
func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile("Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			if strings.ContainsAny(l, "!?[") || (strings.Contains(l, "*") && !strings.HasPrefix(l, "**/")) {
				t.Fatalf("pattern %q: this test knows plain names and **/NAME only", l)
			}
			patterns = append(patterns, l)
		}
	}
	ignored := func(rel string) string {
		parts := strings.Split(filepath.ToSlash(rel), "/")
		for _, p := range patterns {
			if name, ok := strings.CutPrefix(p, "**/"); ok {
				if slices.Contains(parts, name) {
					return p
				}
			} else if rel == p || strings.HasPrefix(filepath.ToSlash(rel), p+"/") {
				return p
			}
		}
		return ""
	}
	out, err := exec.Command("go", "list", "-deps", "-f", `{{if not .Standard}}{{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{end}}`, "../cmd/resolverd", "../cmd/ingest").Output()
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs("..")
	files := []string{"go.mod", "go.sum"}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		rel, err := filepath.Rel(root, f[0])
		if err != nil || strings.HasPrefix(rel, "..") {
			continue // a module's package, from the module cache
		}
		for _, name := range f[1:] {
			files = append(files, filepath.Join(rel, name))
		}
	}
	if len(files) < 20 {
		t.Fatalf("only %d files found to check", len(files))
	}
	for _, f := range files {
		if p := ignored(f); p != "" {
			t.Errorf("%s is needed by the build and ignored by %q", f, p)
		}
	}
}
