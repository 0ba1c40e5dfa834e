package need

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRule runs this test binary again as a child (need_child) under each
// setting and reads how the child's test ended.
func TestRule(t *testing.T) {
	if os.Getenv("NEED_CHILD") == "1" {
		return
	}
	for _, tt := range []struct {
		name string
		env  []string
		tool string
		want string // how the child's TestChild ends
	}{
		{"present", nil, "go", "--- PASS"},
		{"absent, not required", nil, "no-such-tool-xyz", "--- SKIP"},
		{"absent, required", []string{Env + "=1"}, "no-such-tool-xyz", "--- FAIL"},
		{"absent, other value", []string{Env + "=yes"}, "no-such-tool-xyz", "--- SKIP"},
		{"retired variable", []string{"CHENGINE_REQUIRED=1"}, "go", "--- FAIL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestChild$", "-test.v")
			cmd.Env = append(cleanEnv(), append(tt.env, "NEED_CHILD=1", "NEED_TOOL="+tt.tool)...)
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), tt.want+": TestChild") {
				t.Fatalf("want %s:\n%s", tt.want, out)
			}
		})
	}
}

func TestChild(t *testing.T) {
	if os.Getenv("NEED_CHILD") != "1" {
		return // run by TestRule as a child
	}
	Tool(t, os.Getenv("NEED_TOOL"), "install it")
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k != Env && k != "CHENGINE_REQUIRED" && k != "MCP_NPM_REQUIRED" {
			env = append(env, kv)
		}
	}
	return env
}
