// Package chengine runs the real ClickHouse engine on loopback, for tests and
// local development, without a ClickHouse server package.
//
// # Where the engine comes from
//
// The engine is libchdb.so (ClickHouse built as a shared library), shipped in
// the npm package [Package]. [Fetch] (or scripts/fetch-chengine.sh, or
// `chengine fetch`) installs it into a cache directory; [Find] locates it.
// The npm registry is the one place this project can download it from, which
// is why the library comes through npm rather than a release tarball.
//
// # How it serves
//
// Calling the library's exported C function chdb_query_cmdline with
// clickhouse-local style arguments and the query "SYSTEM START LISTEN QUERIES
// ALL; <keep-alive query>" opens the native TCP and HTTP listeners, which live
// as long as that call runs. The keep-alive query sleeps one row at a time over
// system.numbers, so it runs forever at no CPU cost. The library is loaded with
// purego (dlopen without cgo), so building this package needs no C toolchain.
//
// # Why a child process, and why it re-executes the current binary
//
// The engine installs its own signal handlers, keeps global state and cannot
// be unloaded: the only reliable way to stop it is to end the process that
// runs it. So [Start] runs the engine in a child process and [Server.Stop]
// kills that child with SIGKILL. (Data already inserted survives SIGKILL: a
// restart on the same Dir sees it.)
//
// The child is the current executable (os.Executable) started again with the
// environment variable CHENGINE_CHILD set. This package's init function checks
// that variable first thing and, when set, runs the engine and never returns
// to the program's own main or TestMain. Doing it in init rather than in an
// exported MaybeChild() that callers must remember to call has two benefits:
// any binary that imports chengine can launch the engine (the cmd/chengine
// command, this package's tests, and the test binaries of every other package
// that uses chenginetest) with no extra code; and forgetting the call cannot
// turn into a fork bomb, where each child runs TestMain again and starts
// another child. Re-executing a separately built cmd/chengine binary was
// rejected because test binaries of other packages would first have to build
// it.
//
// # Children never outlive their parent
//
// The child watches its stdin, a pipe whose write end only the parent holds,
// and kills itself when that pipe reports EOF (the parent died or called
// Stop). Pdeathsig is not used: it fires when the OS thread that started the
// child exits, which the Go runtime may do while the parent lives on.
//
// # Tests
//
// Package chenginetest gives test binaries one shared server (or one per
// test) and skips, or fails when CHENGINE_REQUIRED=1, when the library has not
// been fetched.
package chengine
