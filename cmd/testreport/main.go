// Command testreport runs `go test -json` and prints what plain `go test`
// prints (each package's ok or FAIL line, the output of failed tests and
// build errors), then a list of every skipped test with its reason. Plain
// `go test` prints "ok" for a package whose tests skipped (the engine
// tests skip when the ClickHouse engine is not fetched), so a run that
// tested little looks like one that tested everything. It is `make test`:
//
//	go build -o bin/testreport ./internal/testreport
//	bin/testreport -- go test -json -count=1 ./...
//
// The exit status is the command's (non-zero also when the stream reports
// a failure the command's status does not); `go run` would turn every
// non-zero status into 1.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"sort"
	"strings"
)

func main() {
	// Ctrl-C reaches go test too (same process group); this process waits
	// for it to stop and still prints what it saw.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: testreport -- go test -json [flags] [packages]")
		return 2
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
		return 1
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "testreport:", err)
		return 1
	}
	r := newReport(stdout)
	readErr := r.read(out)
	err = cmd.Wait()
	r.summary()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode()
	case err != nil:
		fmt.Fprintln(stderr, "testreport:", err)
		return 1
	case readErr != nil:
		fmt.Fprintln(stderr, "testreport:", readErr)
		return 1
	case r.failed:
		return 1
	}
	return 0
}

// event is a line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output
	Test       string
	Output     string
}

type skipped struct{ pkg, test, reason string }

type report struct {
	w       io.Writer
	held    map[[2]string][]string // a running test's output, printed if it fails
	skipped []skipped
	failed  bool
}

func newReport(w io.Writer) *report {
	return &report{w: w, held: map[[2]string][]string{}}
}

// read renders the stream as plain `go test` would; lines that are not
// JSON events pass through.
func (r *report) read(in io.Reader) error {
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var e event
			if json.Unmarshal(line, &e) != nil || e.Action == "" {
				r.w.Write(line)
			} else {
				r.event(e)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r *report) event(e event) {
	key := [2]string{e.Package, e.Test}
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.w, e.Output)
	case e.Test == "" && e.Action == "output":
		if e.Output != "PASS\n" {
			fmt.Fprint(r.w, e.Output)
		}
	case e.Test == "" && e.Action == "fail":
		r.failed = true
		// Output of tests that never ended (a panic, a timeout) explains it.
		for k, lines := range r.held {
			if k[0] == e.Package {
				fmt.Fprint(r.w, strings.Join(lines, ""))
				delete(r.held, k)
			}
		}
	case e.Test == "" && (e.Action == "pass" || e.Action == "skip"):
		for k := range r.held {
			if k[0] == e.Package {
				delete(r.held, k)
			}
		}
	case e.Action == "output":
		if !isFrame(e.Output) {
			r.held[key] = append(r.held[key], e.Output)
		}
	case e.Action == "fail":
		fmt.Fprint(r.w, strings.Join(r.held[key], ""))
		delete(r.held, key)
	case e.Action == "skip":
		r.skipped = append(r.skipped, skipped{e.Package, e.Test, reason(r.held[key])})
		delete(r.held, key)
	case e.Action == "pass":
		delete(r.held, key)
	}
}

// isFrame tells the lines test2json's verbose stream adds and plain
// `go test` does not print.
func isFrame(s string) bool {
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

var logPrefix = regexp.MustCompile(`^\S+\.go:\d+: `)

// reason is what a skipped test logged, without its "--- SKIP" line and
// the file:line prefix of its first line.
func reason(lines []string) string {
	var parts []string
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		parts = append(parts, logPrefix.ReplaceAllString(l, ""))
	}
	if len(parts) == 0 {
		return "(no reason given)"
	}
	return strings.Join(parts, " ")
}

// summary lists the skipped tests by package and reason.
func (r *report) summary() {
	if len(r.skipped) == 0 {
		fmt.Fprintln(r.w, "no test skipped")
		return
	}
	fmt.Fprintf(r.w, "\nSKIPPED: %d tests did not run (their packages still print ok):\n", len(r.skipped))
	type group struct {
		pkg, reason string
		tests       []string
	}
	var groups []*group
	at := map[[2]string]*group{}
	for _, s := range r.skipped {
		k := [2]string{s.pkg, s.reason}
		if at[k] == nil {
			at[k] = &group{pkg: s.pkg, reason: s.reason}
			groups = append(groups, at[k])
		}
		at[k].tests = append(at[k].tests, s.test)
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].pkg < groups[j].pkg })
	for _, g := range groups {
		fmt.Fprintf(r.w, "  %s: %s\n      %s\n", g.pkg, strings.Join(g.tests, ", "), g.reason)
	}
}
