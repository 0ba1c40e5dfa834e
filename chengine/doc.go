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
// # Supervision
//
// [Supervise] keeps an engine serving one Dir on fixed ports: when it exits
// without Stop, writes a fatal error to its log, or stops answering its
// probes for a minute, the supervisor logs why (the exit status or signal,
// the engine's last output and the last error and fatal lines of its
// log), counts it, reports not ready (Supervisor.Ready) and starts a new
// engine on the same data and ports after a backoff (0.5 s, doubling up
// to 30 s while starts keep failing or engines keep dying young). An
// engine whose log reports a fatal error is killed at once: it is about to
// abort, and until it does (about 4 s, see below) it accepts connections
// whose handshakes fail. `resolverd stack` and `resolverd run --embedded`
// run the engine this way (package embedded).
//
// The engine's own log is [LogPath] (Dir/log/engine.log, warnings and
// worse, rotated at 10 MB, three files kept), written through a config
// file Start writes into Dir (only a config file can set the rotation).
// Without it the engine logs nothing at all, and a crash leaves no trace.
//
// # Why the engine aborts when a client is killed
//
// Killing a client of the engine (resolverd run, mid-stream) with SIGKILL
// makes the engine abort (SIGABRT) about 4 s later in an eighth to a third
// of kills (7 of 24 in issue 10; 5 of 23 in a rerun; 4 of 30 over five
// runs of e2e TestKillMidInsertStack). Its log says why:
//
//	<Error> TCPHandler: TCPHandler: Code: 210. DB::NetException: Connection reset by peer, while reading from socket ...
//	<Fatal> ClientBase: ... Terminate called for uncaught exception:
//	<Fatal> ClientBase: Code: 210. DB::NetException: Connection reset by peer, while reading from socket ...
//	<Fatal> ClientBase: ... Received signal 6 (internal) ... Sent by tkill.
//
// The trigger is a connection reset (RST) that arrives while the engine's
// native-protocol handler waits for the connection's next query. The
// kernel resets, rather than closes, the sockets of a process that dies
// with unread data in them, which a client killed mid-stream often has
// (the end of an answer it had not read yet). The handler lets that
// network error escape its thread, and Poco's thread pool hands it to the
// process's Poco::ErrorHandler. clickhouse-server installs one that logs
// and carries on (ServerErrorHandler). This engine is clickhouse-local
// (chdb_query_cmdline runs its LocalServer; the listeners come from SYSTEM
// START LISTEN), which installs KillingErrorHandler when it is not
// interactive: it calls std::terminate, ClickHouse's terminate handler
// logs the exception and aborts. TestResetBetweenQueries reproduces it
// every time with one idle connection closed with SO_LINGER 0; the core
// dump shows the same path (the pooled thread's catch block calls
// ErrorHandler::handle, whose handler only calls std::terminate). A reset
// while the engine reads a query's data, or a clean close (FIN), is
// caught and logged, and costs nothing. The 4 s are the fatal-signal
// handler's: it waits for its log thread (1 s steps), then 3 s more "for
// all logs flush operations", before it re-raises the signal; the engine
// keeps serving until then.
//
// It cannot be fixed from here: the handler is set inside the library
// (stripped; Poco::ErrorHandler::set is not exported), and chdb's other
// entry point, chdb_connect, runs an embedded server without that handler
// but cannot listen ("Can't start servers because start_servers_callback
// is not set", tried). The fix belongs upstream: clickhouse-local should
// install the server's handler once it listens. A real ClickHouse server
// is not affected. Any local process that can reach the engine's port can
// crash it this way; the engine is for tests, development and the demo,
// on loopback. What this package does instead is supervision: the
// supervisor reads the engine's fatal report within a quarter of a second,
// kills it and starts a new one on its data (back within about 2 s), the
// writers' retries carry the pipeline over the gap, and exactly-once holds
// (e2e TestKillMidInsertStack).
//
// # Why a failed login aborts it too, and the guard
//
// The same handler ends the engine on every exception that escapes a
// connection's thread, and the native handler lets escape what goes wrong
// before a session exists: a failed login (a wrong password, an unknown
// user: "uncaught exception: Code: 516 ... Authentication failed"), an
// unknown database in the Hello, a first packet that is neither a Hello
// nor HTTP (a TLS ClientHello from a client with TLS on), a Hello without
// a user. clickhouse-server logs these and carries on; this engine
// aborts, and no setting changes that.
// [Options.Guard] keeps them from reaching it: a guard listens on the
// native port, the engine on another loopback port behind it. The guard
// reads each connection's Hello (64 KiB and 10 s at most), asks the
// engine's HTTP interface whether it accepts the same user, password and
// database (a failed HTTP login is only an answer), and forwards the connection,
// Hello included, only then; anything else it answers itself with a
// native exception (a TLS client sees a plain-text answer) and logs, at
// most a line a second for each kind. When the client's side ends, by a
// reset too, the guard ends the engine's side with a FIN and reads the
// engine's side to its end, so the reset that aborts the engine between
// queries never reaches it. The embedded stack guards its engine
// (package embedded); tests (chenginetest) talk to the engine directly.
// What the guard cannot stop, and what it costs, is in README.md.
//
// # Tests
//
// Package chenginetest gives test binaries one shared server (or one per
// test) and skips, or fails when TOOLAUDIT_REQUIRE=1 (internal/testkit/need), when the library has not
// been fetched.
package chengine
