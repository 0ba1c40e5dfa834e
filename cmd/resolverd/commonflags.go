package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"
)

// commonFlags are the flags every long-running command (run, gateway,
// proxy, reanalyze) repeats: the log level, the Go heap's soft limit and
// collector target, and how long to wait at start for what the command
// connects to.
type commonFlags struct {
	logLevel       string
	memLimitMB     int64
	gcPercent      int
	connectTimeout time.Duration
}

// commonHelp is what a command says of a common flag where the default
// text would not be accurate for it (empty: the default text).
type commonHelp struct {
	logLevel, memLimit, connect string
}

// register adds --log-level, --memory-limit-mb (default memLimitMB),
// --gc-percent (default gcPercent) and --connect-timeout to fs.
func (c *commonFlags) register(fs *flag.FlagSet, memLimitMB int64, gcPercent int, help commonHelp) {
	fs.StringVar(&c.logLevel, "log-level", "info", cmp.Or(help.logLevel, "log `level`: debug, info, warn, error"))
	fs.Int64Var(&c.memLimitMB, "memory-limit-mb", memLimitMB, cmp.Or(help.memLimit, "soft memory limit of the Go heap in `MiB` (GOMEMLIMIT; 0: none)"))
	fs.IntVar(&c.gcPercent, "gc-percent", gcPercent, "the Go collector's target: heap growth in `percent` of the live heap before it runs (GOGC; the environment's GOGC wins); --memory-limit-mb bounds the heap whatever it is")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 30*time.Second, cmp.Or(help.connect, "how long to wait at start for a Kafka broker to answer"))
}

// logger checks the three flags (a usage error names the flag) and
// returns the command's logger on w at --log-level.
func (c *commonFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, usageError{fmt.Errorf("bad --log-level: %w", err)}
	}
	if c.connectTimeout <= 0 {
		return nil, usageError{fmt.Errorf("--connect-timeout %s: want a positive duration", c.connectTimeout)}
	}
	if c.memLimitMB < 0 {
		return nil, usageError{fmt.Errorf("--memory-limit-mb %d: want 0 (no limit) or more", c.memLimitMB)}
	}
	if c.gcPercent <= 0 {
		return nil, usageError{fmt.Errorf("--gc-percent %d: want a positive percentage", c.gcPercent)}
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl})), nil
}

// limitMemory sets the heap's soft limit of --memory-limit-mb and the
// collector's target of --gc-percent.
func (c *commonFlags) limitMemory() {
	limitMemory(c.memLimitMB)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(c.gcPercent)
	}
}

// limitMemory sets the Go heap's soft limit to mb MiB unless mb is 0 or
// GOMEMLIMIT is set (the environment wins): a backlog or a large input
// must not grow the heap without bound, the collector works harder
// instead as the limit nears.
func limitMemory(mb int64) {
	if mb > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(mb << 20)
	}
}
