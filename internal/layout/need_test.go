package layout

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// needRule matches what only package internal/testkit/need may do: look
// software up on PATH, or read a variable that decides whether a missing
// piece skips or fails.
var needRule = regexp.MustCompile(`exec\.LookPath\([^)]*\)|os\.(Getenv|LookupEnv)\("[A-Z_]*REQUIRED?"\)`)

// TestNeed: every test that runs software from outside the module asks
// package need (one rule, one variable); no other Go file of the module
// looks a tool up or reads a "required" variable itself. Commands may look
// up what they run (chengine's fetch runs npm): they are listed.
func TestNeed(t *testing.T) {
	allowed := map[string]bool{
		"internal/testkit/need/need.go": true,
		"chengine/find.go":              true, // fetching the engine runs npm
		"internal/layout/need_test.go":  true, // the rule itself
	}
	var offenders []string
	n := 0
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && p != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, "../../"))
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		for _, m := range needRule.FindAll(b, -1) {
			if !allowed[rel] {
				offenders = append(offenders, rel+": "+string(m))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 200 {
		t.Fatalf("read %d Go files: not the module", n)
	}
	for _, o := range offenders {
		t.Errorf("%s: ask package internal/testkit/need (need.Tool, need.Engine, need.Missing) instead", o)
	}
}
