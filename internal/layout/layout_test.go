package layout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const (
	module = "github.com/toolaudit/toolaudit"
	// design is where the layers are written down; the test reads them
	// from there, so that the page and the check cannot drift.
	design = "../../docs/design.md"
	// testKits is the name of the layer whose packages only tests, other
	// test kits and the measurement commands may import.
	testKits = "test kits"
)

// layer is a row of docs/design.md's table of layers.
type layer struct {
	rank  int
	name  string
	paths []string // packages, each with the packages in its folders
}

// pkg is a package of the module as go list reads it: the module's
// packages its non-test files import.
type pkg struct {
	path    string
	imports []string
}

// TestLayers: no package imports from a layer above its own, every
// package is in a layer, and test kits are imported only by tests, test
// kits and the measurement commands (docs/design.md, "Layers").
func TestLayers(t *testing.T) {
	f, err := os.Open(design)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	layers, err := readLayers(f)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := listPackages(t)
	if len(pkgs) < 40 {
		t.Fatalf("go list read %d packages: not the module", len(pkgs))
	}
	for _, v := range check(layers, pkgs) {
		t.Error(v)
	}
}

// TestCheck: the checker finds each kind of violation, and passes a graph
// that keeps the rules.
func TestCheck(t *testing.T) {
	layers := []layer{
		{1, "contract", []string{"schema"}},
		{2, "services", []string{"stream", "stream/deep"}},
		{3, testKits, []string{"internal/testkit", "stream/streamtest"}},
		{4, "commands", []string{"cmd"}},
	}
	for _, tc := range []struct {
		name string
		pkgs []pkg
		want []string // substrings of the violations, in order
	}{
		{"kept", []pkg{
			{"schema", nil},
			{"stream", []string{"schema"}},
			{"stream/deep", []string{"stream", "schema"}},
			{"stream/streamtest", []string{"stream"}},
			{"internal/testkit/kit", []string{"stream/streamtest"}},
			{"cmd/run", []string{"stream", "schema"}},
			{"cmd/benchrun", []string{"internal/testkit/kit"}},
			{"cmd/fleetgen", []string{"stream/streamtest"}},
		}, nil},
		{"upward", []pkg{{"schema", []string{"stream"}}, {"stream", nil}},
			[]string{"schema (layer 1 contract) imports stream (layer 2 services)"}},
		{"subpackage inherits", []pkg{{"schema/sub", []string{"stream/x"}}, {"stream/x", nil}},
			[]string{"schema/sub (layer 1 contract) imports stream/x (layer 2 services)"}},
		{"longest path wins", []pkg{{"stream", []string{"stream/streamtest"}}, {"stream/streamtest", nil}},
			[]string{"stream (layer 2 services) imports stream/streamtest (layer 3 test kits)", "test kit stream/streamtest is imported by stream"}},
		{"kit in a command", []pkg{{"cmd/run", []string{"internal/testkit/kit"}}, {"internal/testkit/kit", nil}},
			[]string{"test kit internal/testkit/kit is imported by cmd/run"}},
		{"unplaced", []pkg{{"approvals", []string{"schema"}}, {"schema", nil}},
			[]string{"approvals is in no layer"}},
		{"prefix is not a folder", []pkg{{"streams", nil}},
			[]string{"streams is in no layer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := check(layers, tc.pkgs)
			if len(got) != len(tc.want) {
				t.Fatalf("violations %q, want %d: %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d: %q, want %q", i, got[i], w)
				}
			}
		})
	}
}

// TestReadLayers: the table is read from its section only, in order, and
// a row the test cannot read fails rather than being skipped.
func TestReadLayers(t *testing.T) {
	page := "## Packages\n\n| 1 not | `x` |\n\n## Layers\n\ntext\n\n| layer | packages |\n|---|---|\n" +
		"| 1 helpers | `internal/par`, `internal/lines` |\n| 2 contract | `schema` |\n\n## Next\n\n| 3 no | `y` |\n"
	ls, err := readLayers(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	want := []layer{{1, "helpers", []string{"internal/par", "internal/lines"}}, {2, "contract", []string{"schema"}}}
	if fmt.Sprint(ls) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", ls, want)
	}
	for _, bad := range []string{
		"## Layers\n\n| layer | packages |\n|---|---|\n| helpers | `a` |\n",            // no rank
		"## Layers\n\n| layer | packages |\n|---|---|\n| 2 b | `a` |\n",                // ranks not 1, 2, ...
		"## Layers\n\n| layer | packages |\n|---|---|\n| 1 b | a |\n",                  // no package named
		"## Layers\n\n| layer | packages |\n|---|---|\n| 1 b | `a` |\n| 2 c | `a` |\n", // twice
		"## Packages\n",
	} {
		if ls, err := readLayers(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: read %v, want an error", bad, ls)
		}
	}
}

var (
	rowRE  = regexp.MustCompile(`^\|\s*(\d+)?\s*([^|]*?)\s*\|(.*)\|\s*$`)
	pathRE = regexp.MustCompile("`([^`]+)`")
)

// readLayers reads the table of section "## Layers".
func readLayers(r io.Reader) ([]layer, error) {
	var ls []layer
	in, header := false, 0
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Layers"
			continue
		}
		if !in || !strings.HasPrefix(line, "|") {
			continue
		}
		if header < 2 { // the header and its rule
			header++
			continue
		}
		m := rowRE.FindStringSubmatch(line)
		if m == nil || m[1] == "" {
			return nil, fmt.Errorf("layers: row %q: want | N name | `package`, ... |", line)
		}
		rank, _ := strconv.Atoi(m[1])
		if rank != len(ls)+1 {
			return nil, fmt.Errorf("layers: row %q: layer %d after %d", line, rank, len(ls))
		}
		l := layer{rank: rank, name: m[2]}
		for _, p := range pathRE.FindAllStringSubmatch(m[3], -1) {
			if seen[p[1]] {
				return nil, fmt.Errorf("layers: %s is named twice", p[1])
			}
			seen[p[1]] = true
			l.paths = append(l.paths, p[1])
		}
		if len(l.paths) == 0 {
			return nil, fmt.Errorf("layers: row %q names no package", line)
		}
		ls = append(ls, l)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("layers: no table in section \"## Layers\"")
	}
	return ls, nil
}

// listPackages lists the module's packages and what their non-test files
// import of the module, paths relative to the module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,Error", "./...") // the module's own: not resolveclient
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		q := pkg{path: rel(p.ImportPath)}
		for _, i := range p.Imports {
			if r := rel(i); r != i {
				q.imports = append(q.imports, r)
			}
		}
		pkgs = append(pkgs, q)
	}
	return pkgs
}

// rel is p relative to the module, or p when it is not the module's.
func rel(p string) string {
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r
	}
	return p
}

// check returns the violations of the layers by pkgs.
func check(layers []layer, pkgs []pkg) []string {
	var vs []string
	placed := map[string]layer{}
	for _, p := range pkgs {
		l, ok := layerOf(layers, p.path)
		if !ok {
			vs = append(vs, fmt.Sprintf("%s is in no layer: place it in docs/design.md's table of layers", p.path))
			continue
		}
		placed[p.path] = l
	}
	for _, p := range pkgs {
		l, ok := placed[p.path]
		if !ok {
			continue
		}
		for _, i := range p.imports {
			il, ok := placed[i]
			if !ok {
				continue // said above
			}
			if il.rank > l.rank {
				vs = append(vs, fmt.Sprintf("%s (layer %d %s) imports %s (layer %d %s): an import runs up", p.path, l.rank, l.name, i, il.rank, il.name))
			}
			if il.name == testKits && l.name != testKits && !measures(p.path) {
				vs = append(vs, fmt.Sprintf("test kit %s is imported by %s: only tests, test kits and the measurement commands may", i, p.path))
			}
		}
	}
	return vs
}

// layerOf is the layer of the longest path that is p or a folder above it.
func layerOf(layers []layer, p string) (layer, bool) {
	var best layer
	n := -1
	for _, l := range layers {
		for _, q := range l.paths {
			if (p == q || strings.HasPrefix(p, q+"/")) && len(q) > n {
				best, n = l, len(q)
			}
		}
	}
	return best, n >= 0
}

// measures tells whether p is a measurement command: a bench command
// (cmd/benchapi, cmd/benchanalytics) or the generator of their fleets
// (cmd/fleetgen).
func measures(p string) bool {
	return strings.HasPrefix(path.Base(p), "bench") || p == "cmd/fleetgen"
}
