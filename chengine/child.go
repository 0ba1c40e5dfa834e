package chengine

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"

	"github.com/ebitengine/purego"
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

	h, err := purego.Dlopen(s.Lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("load %s: %w", s.Lib, err)
	}
	// From chdb.h: chdb_result *chdb_query_cmdline(int argc, char **argv);
	//              const char *chdb_result_error(chdb_result *result);
	var queryCmdline func(argc int32, argv **byte) uintptr
	var resultError func(res uintptr) string
	purego.RegisterLibFunc(&queryCmdline, h, "chdb_query_cmdline")
	purego.RegisterLibFunc(&resultError, h, "chdb_result_error")

	// argv as NUL-terminated C strings. The Go heap does not move objects and
	// the slices stay referenced until the call returns, so C may keep them.
	ptrs := make([]*byte, len(s.Argv)+1)
	for i, a := range s.Argv {
		b := append([]byte(a), 0)
		ptrs[i] = &b[0]
	}
	res := queryCmdline(int32(len(s.Argv)), &ptrs[0])
	runtime.KeepAlive(ptrs)
	// The engine prints its own errors (e.g. "Address already in use") to
	// stderr; chdb_result_error is often empty for them.
	if res != 0 {
		if msg := resultError(res); msg != "" {
			return fmt.Errorf("engine stopped serving: %s", msg)
		}
	}
	return fmt.Errorf("engine stopped serving (its error, if any, is above)")
}
