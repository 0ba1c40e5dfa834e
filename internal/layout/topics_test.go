package layout

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// topicLiteral is a topic's default name written as a string literal.
var topicLiteral = regexp.MustCompile(`"tool-(calls|listings|calls-dlq|audit|approvals|decisions)"`)

// TestTopicNames: the topics' default names are written once, in
// schema/topics.go; the code of the module says the constants (tests
// and comments may name the topics as they like).
func TestTopicNames(t *testing.T) {
	var offenders []string
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != "../.." && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		rel := filepath.ToSlash(strings.TrimPrefix(p, "../../"))
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || rel == "schema/topics.go" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if code, _, _ := strings.Cut(line, "//"); !strings.HasPrefix(line, "//") && topicLiteral.MatchString(code) {
				offenders = append(offenders, rel+":"+strconv.Itoa(n)+": "+line)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offenders {
		t.Errorf("%s: say schema.Topic* instead", o)
	}
}
