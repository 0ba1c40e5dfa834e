package layout

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMains: every package main of the module is under cmd/, so that a
// command, whether for users, measurement or the build, is found in one
// place (docs/design.md, "Layers").
func TestMains(t *testing.T) {
	var outside []string
	mains := 0
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "../.." && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || d.Name() == "resolveclient") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.HasPrefix(b, []byte("package main\n")) || bytes.Contains(b, []byte("\npackage main\n")) {
			mains++
			if rel := filepath.ToSlash(strings.TrimPrefix(p, "../../")); !strings.HasPrefix(rel, "cmd/") {
				outside = append(outside, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if mains < 10 {
		t.Fatalf("%d files of package main found: not the module", mains)
	}
	for _, o := range outside {
		t.Errorf("%s: package main outside cmd/", o)
	}
}
