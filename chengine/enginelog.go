package chengine

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The engine's own log: warnings, errors and the report its fatal-signal
// handler writes before the process dies (the signal, the thread, the
// query, a stack trace), which is the one place that says why an engine
// died. Without a log file the engine logs nothing at all: its stdout and
// stderr carry only start-up refusals.
const (
	// engineLogLevel keeps the log to what explains a failure; the
	// engine's default (trace) writes several lines per query.
	engineLogLevel = "warning"
	// engineLogSize and engineLogCount bound the log on disk (the engine
	// rotates it): a client sending failing queries in a loop fills it at
	// disk speed otherwise.
	engineLogSize  = "10M"
	engineLogCount = 3
	// configName is the engine's config file in Dir, rewritten at every
	// start. Only a config file can set the log's rotation: the command
	// line accepts --logger.log and --log-level but no size or count.
	configName = "chengine.xml"
)

// LogPath is the engine's log file for the data directory dir:
// dir/log/engine.log, rotated to engine.log.0 ... at 10 MB, three kept.
func LogPath(dir string) string { return filepath.Join(dir, "log", "engine.log") }

// writeConfig writes the engine's config file into dir, with a copy of
// the caller's configuration file user (if any) in dir/chengine.d, which
// the engine merges over it, and returns the engine arguments that use
// them. The engine takes one --config-file; ClickHouse merges the files of
// a directory named after the config file (clickhouse-local, unlike the
// server, ignores config.d and conf.d: tried on 26.7).
func writeConfig(dir, user string) ([]string, error) {
	if err := os.MkdirAll(filepath.Dir(LogPath(dir)), 0o755); err != nil {
		return nil, fmt.Errorf("chengine: log dir: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("<clickhouse>\n  <logger>\n    <log>")
	if err := xml.EscapeText(&b, []byte(LogPath(dir))); err != nil {
		return nil, fmt.Errorf("chengine: %w", err)
	}
	fmt.Fprintf(&b, "</log>\n    <level>%s</level>\n    <size>%s</size>\n    <count>%d</count>\n  </logger>\n</clickhouse>\n",
		engineLogLevel, engineLogSize, engineLogCount)
	cfg := filepath.Join(dir, configName)
	if err := os.WriteFile(cfg, b.Bytes(), 0o644); err != nil {
		return nil, fmt.Errorf("chengine: engine config: %w", err)
	}
	if err := copyUserConfig(dir, user); err != nil {
		return nil, err
	}
	// --log-level too: the command line's default level overrides the
	// config file's.
	return []string{"--config-file=" + cfg, "--log-level=" + engineLogLevel}, nil
}

// openLog opens the engine's log at path and returns it with its size.
func openLog(path string) (f *os.File, size int64, ok bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, false
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, false
	}
	return f, st.Size(), true
}

// logTail returns the last max bytes of the engine's log written at or
// after offset from (the log's size when this engine started), starting at
// a line boundary; "" if there is none or it cannot be read. A rotation
// since then leaves the file shorter than from: the whole file is new.
func logTail(path string, from int64, max int64) string {
	f, size, ok := openLog(path)
	if !ok {
		return ""
	}
	defer f.Close()
	if size < from {
		from = 0
	}
	start := from
	if size-start > max {
		start = size - max
	}
	b, err := io.ReadAll(io.NewSectionReader(f, start, size-start))
	if err != nil {
		return ""
	}
	if start > from {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(bytes.TrimRight(b, "\n"))
}

// lastWords picks out of the end of an engine log the lines that say why
// it failed: errors and fatal messages, newest last, at most max of them,
// each cut at 400 bytes. Stack frames are left out (the library is
// stripped: they are bare addresses), and so are the warnings that make up
// most of the log (BackgroundSchedulePool pauses, about one a second).
func lastWords(log string, max int) string {
	var keep []string
	for line := range strings.Lines(log) {
		line = strings.TrimRight(line, "\n")
		_, msg, ok := strings.Cut(line, " <Fatal> ")
		if !ok {
			_, msg, ok = strings.Cut(line, " <Error> ")
		}
		if !ok {
			_, msg, ok = strings.Cut(line, " <Critical> ")
		}
		if !ok {
			continue
		}
		// Fatal reports repeat the logger's name on every line: drop it,
		// then the frames and the blank lines.
		if _, rest, ok := strings.Cut(msg, ": "); ok {
			msg = rest
		}
		msg = strings.TrimSpace(msg)
		if msg == "" || isFrame(msg) || strings.HasPrefix(msg, "Stack trace: 0x") || strings.HasPrefix(msg, "(version ") && len(msg) < 40 {
			continue
		}
		if len(line) > 400 {
			line = line[:400] + "…"
		}
		keep = append(keep, line)
	}
	if len(keep) > max {
		keep = keep[len(keep)-max:]
	}
	return strings.Join(keep, "\n")
}

// fatalSummary is the one line of an engine's last words (lastWords) that
// says best why it failed: the exception that reached std::terminate, or
// the signal it received, or else its last line.
func fatalSummary(words string) string {
	lines := strings.Split(words, "\n")
	msg := func(l string) string {
		if _, m, ok := strings.Cut(l, "> "); ok { // after the level tag
			l = m
		}
		if _, m, ok := strings.Cut(l, ": "); ok { // after the logger's name
			l = m
		}
		return l[:min(len(l), 300)]
	}
	for i, l := range lines {
		if strings.Contains(l, "Terminate called") && i+1 < len(lines) {
			return "uncaught exception: " + msg(lines[i+1])
		}
	}
	for _, l := range lines {
		if i := strings.Index(l, "Received signal"); i >= 0 {
			return l[i:]
		}
	}
	return msg(lines[len(lines)-1])
}

// isFrame reports whether s is a stack frame line: "12. ? @ 0x...".
func isFrame(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i > 0 && strings.HasPrefix(s[i:], ". ")
}

// fatalWatch follows the engine's log for the report an engine writes when
// it is about to die ("<Fatal>" lines: an uncaught exception, a fatal
// signal), which comes about 4 s before the process ends (package doc).
type fatalWatch struct {
	path string
	off  int64 // bytes of the log already looked at
}

// maxFatalRead bounds one poll's read; the rest waits for the next poll.
const maxFatalRead = 1 << 20

// poll returns the engine's last words (see lastWords) if the lines added
// to the log since the last poll hold a fatal one, else "".
func (w *fatalWatch) poll() string {
	f, size, ok := openLog(w.path)
	if !ok {
		return ""
	}
	defer f.Close()
	if size < w.off { // rotated: a new file
		w.off = 0
	}
	n := min(size-w.off, maxFatalRead)
	if n == 0 {
		return ""
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, w.off); err != nil {
		return ""
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1] // whole lines only; the rest next time
	} else if n < maxFatalRead {
		return ""
	}
	w.off += int64(len(b))
	if !bytes.Contains(b, []byte(" <Fatal> ")) {
		return ""
	}
	return lastWords(string(b), 20)
}

// logSize is the current size of the engine's log, 0 if it has none.
func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// copyUserConfig makes dir/chengine.d hold a copy of user, or nothing
// when user is "" (a previous start's copy is removed).
func copyUserConfig(dir, user string) error {
	d := filepath.Join(dir, strings.TrimSuffix(configName, ".xml")+".d")
	if err := os.RemoveAll(d); err != nil {
		return fmt.Errorf("chengine: engine config: %w", err)
	}
	if user == "" {
		return nil
	}
	b, err := os.ReadFile(user)
	if err != nil {
		return fmt.Errorf("chengine: Options.ConfigFile: %w", err)
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("chengine: engine config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(d, "options"+filepath.Ext(user)), b, 0o644); err != nil {
		return fmt.Errorf("chengine: engine config: %w", err)
	}
	return nil
}
