package bins

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBuild: a command is built where every test binary of the run finds
// it, runs, and a second build of an unchanged source leaves the same file
// (go build found it up to date and only touched it: a link writes a new
// file in its place).
func TestBuild(t *testing.T) {
	p := Path(t, "ingest", Dev)
	out, _ := exec.Command(p, "--help").CombinedOutput()
	if !strings.Contains(string(out), "ingest") {
		t.Fatalf("%s --help:\n%s", p, out)
	}
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if q := Path(t, "ingest", Dev); q != p {
		t.Fatalf("second build at %s, first at %s", q, p)
	}
	after, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Fatal("an up-to-date binary was linked again")
	}
	if _, err := Build("no-such-command", Dev); err == nil {
		t.Fatal("a command that does not exist built")
	}
}
