package chengine

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
)

// envChild carries the child's job (JSON childSpec) from Start to the
// re-executed binary. Its presence is what makes a process a child.
const envChild = "CHENGINE_CHILD"

type childSpec struct {
	Lib  string   `json:"lib"`
	Argv []string `json:"argv"`
}

// init turns the process into an engine child when Start launched it; see the
// package doc for why this happens in init rather than in a function the
// program must call.
func init() {
	v, ok := os.LookupEnv(envChild)
	if !ok {
		return
	}
	// Unset so nothing the engine spawns mistakes itself for a child.
	os.Unsetenv(envChild)
	if err := runChild(v); err != nil {
		fmt.Fprintln(os.Stderr, "chengine child:", err)
	}
	os.Exit(1) // the engine call only returns when serving failed
}

func runChild(spec string) error {
	var s childSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("bad %s: %w", envChild, err)
	}
	// stdin is a pipe only the parent writes to: EOF means the parent is gone
	// (or stopping us), so die at once rather than serve as an orphan.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}()

	return serve(s.Lib, s.Argv)
}
