//go:build !nochengine

package chengine

import (
	"fmt"
	"runtime"

	"github.com/ebitengine/purego"
)

// built says whether this binary can run the engine: see serve_none.go.
const built = true

// serve loads the engine library and serves until the engine stops.
func serve(lib string, argv []string) error {
	h, err := purego.Dlopen(lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return fmt.Errorf("load %s: %w", lib, err)
	}
	// From chdb.h: chdb_result *chdb_query_cmdline(int argc, char **argv);
	//              const char *chdb_result_error(chdb_result *result);
	var queryCmdline func(argc int32, argv **byte) uintptr
	var resultError func(res uintptr) string
	purego.RegisterLibFunc(&queryCmdline, h, "chdb_query_cmdline")
	purego.RegisterLibFunc(&resultError, h, "chdb_result_error")

	// argv as NUL-terminated C strings. The Go heap does not move objects and
	// the slices stay referenced until the call returns, so C may keep them.
	ptrs := make([]*byte, len(argv)+1)
	for i, a := range argv {
		b := append([]byte(a), 0)
		ptrs[i] = &b[0]
	}
	res := queryCmdline(int32(len(argv)), &ptrs[0])
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
