// Command chengine fetches and serves the ClickHouse engine (libchdb.so) on
// loopback; see package chengine for how and why.
//
//	chengine fetch [--dir DIR]
//	chengine serve --dir DIR [--tcp-port N] [--http-port N] [--lib PATH]
//
// The engine runs in a child process that re-executes this binary; importing
// chengine is all that takes (its init function handles the child mode).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolaudit/toolaudit/chengine"
)

const usage = `chengine runs the real ClickHouse engine (libchdb.so from npm %s)
on 127.0.0.1, for tests and local development.

Usage:
  chengine fetch [--dir DIR]
      Install the engine with npm into DIR (default %s).
      Does nothing if it is already there. Same as scripts/fetch-chengine.sh.

  chengine serve --dir DIR [--tcp-port N] [--http-port N] [--lib PATH]
      Serve the native and HTTP protocols from data directory DIR (created if
      missing; data survives restarts). Ports default to free ones; the chosen
      addresses are printed on stdout as "native HOST:PORT" and
      "http HOST:PORT". Runs until SIGINT or SIGTERM, then kills the engine
      and exits 0. The library is found as in fetch unless --lib is given;
      $CHENGINE_LIB overrides the default location.

Run "chengine COMMAND --help" for the flags of a command.
`

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0) // asked for help
	case err != nil:
		fmt.Fprintln(os.Stderr, "chengine:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	defDir, err := chengine.DefaultDir()
	if err != nil {
		defDir = "$XDG_CACHE_HOME/toolaudit/chengine"
	}
	if len(args) == 0 {
		fmt.Fprintf(stderr, usage, chengine.Package, defDir)
		return errors.New("no command")
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, usage, chengine.Package, defDir)
		return flag.ErrHelp
	}
	fs := flag.NewFlagSet("chengine "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage of chengine %s (see chengine --help):\n", args[0])
		fs.PrintDefaults()
	}
	switch args[0] {
	case "fetch":
		dir := fs.String("dir", defDir, "cache `DIR` to install the npm package into")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if err := chengine.Fetch(ctx, *dir); err != nil {
			return err
		}
		lib, err := chengine.Find(*dir)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, lib)
		return nil
	case "serve":
		dir := fs.String("dir", "", "data `DIR` (required)")
		tcpPort := fs.Int("tcp-port", 0, "native protocol `PORT` (0: pick a free one)")
		httpPort := fs.Int("http-port", 0, "HTTP `PORT` (0: pick a free one)")
		lib := fs.String("lib", "", "`PATH` of libchdb.so (default: $CHENGINE_LIB, else the fetch cache dir)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *dir == "" {
			return errors.New("serve: --dir is required")
		}
		return serve(ctx, chengine.Options{Dir: *dir, TCPPort: *tcpPort, HTTPPort: *httpPort, Lib: *lib,
			Logger: slog.New(slog.NewTextHandler(stderr, nil))}, stdout)
	default:
		fmt.Fprintf(stderr, usage, chengine.Package, defDir)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// serve runs the engine until a signal arrives or the engine dies. The signal
// is handled here, in the parent, because the engine child ignores or
// mishandles polite signals; Stop SIGKILLs it.
func serve(ctx context.Context, opts chengine.Options, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := chengine.Start(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "native %s\nhttp %s\n", srv.Addr(), srv.HTTPAddr())
	died := make(chan error, 1)
	go func() { died <- srv.Wait() }()
	select {
	case <-ctx.Done():
		return srv.Stop()
	case err := <-died:
		return err
	}
}
