package chengine

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogTail(t *testing.T) {
	const log = "line one\nline two\nline three\n"
	for _, tc := range []struct {
		name      string
		content   string
		from, max int64
		want      string
	}{
		{"all", log, 0, 1 << 10, "line one\nline two\nline three"},
		{"since from", log, 9, 1 << 10, "line two\nline three"},
		{"last bytes cut at a line start", log, 0, 14, "line three"},
		{"nothing new", log, int64(len(log)), 1 << 10, ""},
		{"rotated since from: all of it is new", "fresh\n", 100, 1 << 10, "fresh"},
		{"no trailing newline", "a\nb", 0, 1 << 10, "a\nb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "engine.log")
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := logTail(p, tc.from, tc.max); got != tc.want {
				t.Fatalf("logTail = %q, want %q", got, tc.want)
			}
		})
	}
	if got := logTail(filepath.Join(t.TempDir(), "none"), 0, 10); got != "" {
		t.Fatalf("missing file: %q", got)
	}
}

func TestLastLines(t *testing.T) {
	w := &tailWriter{max: 64, log: slog.New(slog.DiscardHandler)}
	for _, tc := range []struct {
		write string
		n     int
		want  string
	}{
		{"", 3, ""},
		{"one\n", 3, "one"},
		{"two\nthree\n", 2, "two\nthree"},
		{"", 10, "one\ntwo\nthree"},
		{strings.Repeat("x", 70) + "\nlast\n", 1, "last"},
	} {
		w.Write([]byte(tc.write))
		if got := w.lastLines(tc.n); got != tc.want {
			t.Fatalf("after %q: lastLines(%d) = %q, want %q", tc.write, tc.n, got, tc.want)
		}
	}
}

// TestWriteConfig: the engine's config names its log, escaped for XML.
func TestWriteConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a&b<c")
	args, err := writeConfig(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(dir, configName))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "<log>"+filepath.Join(filepath.Dir(dir), "a&amp;b&lt;c", "log", "engine.log")+"</log>") {
		t.Fatalf("config:\n%s", cfg)
	}
	if st, err := os.Stat(filepath.Dir(LogPath(dir))); err != nil || !st.IsDir() {
		t.Fatalf("log dir: %v", err)
	}
	if want := "--config-file=" + filepath.Join(dir, configName); args[0] != want {
		t.Fatalf("args %q, want %q first", args, want)
	}
}

// TestLastWords: out of a real crash's log (testdata/abort.log: a client's
// connection reset between queries), the lines that say what happened.
func TestLastWords(t *testing.T) {
	b, err := os.ReadFile("testdata/abort.log")
	if err != nil {
		t.Fatal(err)
	}
	got := lastWords(string(b), 20)
	lines := strings.Split(got, "\n")
	for _, want := range []string{
		"<Error> TCPHandler: TCPHandler: Code: 210. DB::NetException: Connection reset by peer, while reading from socket",
		"Terminate called for uncaught exception:",
		"<Fatal> ClientBase: Code: 210. DB::NetException: Connection reset by peer",
		"Received signal Aborted (6)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, " @ 0x") || strings.Contains(l, "Temporarily pause") || strings.HasSuffix(l, "ClientBase: ") || len(l) > 400+len("…") {
			t.Errorf("line kept: %q", l)
		}
	}
	if len(lines) != 10 {
		t.Errorf("%d lines kept, want 10:\n%s", len(lines), got)
	}
	if last2 := lastWords(string(b), 2); last2 != strings.Join(lines[len(lines)-2:], "\n") {
		t.Errorf("lastWords(2) = %q", last2)
	}
	if s, want := fatalSummary(got), "uncaught exception: Code: 210. DB::NetException: Connection reset by peer, while reading from socket"; !strings.HasPrefix(s, want) {
		t.Errorf("fatalSummary = %q, want %q...", s, want)
	}
	if s := fatalSummary(lines[len(lines)-1]); s != "Sent by tkill." {
		t.Errorf("fatalSummary of one line = %q", s)
	}
	if w := lastWords("2026.11.30 14:53:51 [ 1 ] {} <Warning> x: y\n", 5); w != "" {
		t.Errorf("warnings only: %q", w)
	}
}

// TestFatalWatch: the watch reports a fatal report once, whole lines only,
// and follows the log across a rotation.
func TestFatalWatch(t *testing.T) {
	abort, err := os.ReadFile("testdata/abort.log")
	if err != nil {
		t.Fatal(err)
	}
	warning := "2026.11.30 14:53:51.000000 [ 1 ] {} <Warning> BgSchPool: Temporarily pause scheduling\n"
	p := filepath.Join(t.TempDir(), "engine.log")
	appendLog := func(s string) {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString(s)
		f.Close()
	}
	w := fatalWatch{path: p}
	if got := w.poll(); got != "" {
		t.Fatalf("no log yet: %q", got)
	}
	appendLog(warning)
	if got := w.poll(); got != "" {
		t.Fatalf("warnings only: %q", got)
	}
	// A fatal line still being written is not read yet.
	i := strings.Index(string(abort), "<Fatal>")
	appendLog(string(abort[:i+10]))
	if got := w.poll(); got != "" {
		t.Fatalf("half a line: %q", got)
	}
	appendLog(string(abort[i+10:]))
	if got := w.poll(); !strings.Contains(got, "Terminate called for uncaught exception") || strings.Contains(got, "Temporarily") {
		t.Fatalf("fatal report: %q", got)
	}
	if got := w.poll(); got != "" {
		t.Fatalf("reported twice: %q", got)
	}
	os.WriteFile(p, []byte(warning), 0o644) // rotated
	if got := w.poll(); got != "" {
		t.Fatalf("after rotation: %q", got)
	}
	appendLog(string(abort))
	if got := w.poll(); !strings.Contains(got, "Received signal Aborted (6)") {
		t.Fatalf("fatal report after rotation: %q", got)
	}
}
