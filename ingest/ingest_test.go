package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// testDefaults are the flag defaults of every fixture test.
var testDefaults = Meta{Registry: "fleet-a", AgentID: "a-default"}

// wantEvent is one line of a testdata/*.want.jsonl file.
type wantEvent struct {
	Kind      string          `json:"kind"`
	Key       *string         `json:"key"`
	Timestamp string          `json:"timestamp"` // "" = no record timestamp
	Value     json.RawMessage `json:"value"`
}

// collect is a sink that keeps every event.
type collect struct{ events []Event }

func (c *collect) Append(_ context.Context, ev Event) error {
	c.events = append(c.events, ev)
	return nil
}
func (c *collect) Flush(context.Context) error { return nil }

type result struct {
	events   []Event
	errs     []*LineError
	warnings []*LineError
	stats    Stats
}

// ingestFile runs an Ingester over a testdata file, named by its base name.
func ingestFile(t *testing.T, file string, format Format, defaults Meta, maxLine int) result {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r result
	sink := &collect{}
	in := &Ingester{
		Sink:         sink,
		Format:       format,
		Defaults:     defaults,
		MaxLineBytes: maxLine,
		OnError:      func(e *LineError) { r.errs = append(r.errs, e) },
		OnWarning:    func(e *LineError) { r.warnings = append(r.warnings, e) },
	}
	r.stats, err = in.Ingest(context.Background(), file, f)
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	r.events = sink.events
	return r
}

func readWant(t *testing.T, file string) []wantEvent {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var out []wantEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var w wantEvent
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, w)
	}
	return out
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("bad JSON %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("bad JSON %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func checkEvents(t *testing.T, got []Event, want []wantEvent) {
	t.Helper()
	if len(got) != len(want) {
		for _, ev := range got {
			t.Logf("got %s %q %s", ev.Kind, ev.Key, ev.Value)
		}
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for i, w := range want {
		ev := got[i]
		if ev.Kind.String() != w.Kind {
			t.Errorf("event %d: kind %s, want %s", i, ev.Kind, w.Kind)
		}
		switch {
		case w.Key == nil && ev.Key != nil:
			t.Errorf("event %d: key %q, want none", i, ev.Key)
		case w.Key != nil && string(ev.Key) != *w.Key:
			t.Errorf("event %d: key %q, want %q", i, ev.Key, *w.Key)
		}
		ts := ""
		if !ev.Timestamp.IsZero() {
			ts = ev.Timestamp.UTC().Format(TimeLayout)
		}
		if ts != w.Timestamp {
			t.Errorf("event %d: timestamp %q, want %q", i, ts, w.Timestamp)
		}
		if !jsonEqual(t, ev.Value, w.Value) {
			t.Errorf("event %d:\n got %s\nwant %s", i, ev.Value, w.Value)
		}
	}
}

func TestFixtures(t *testing.T) {
	tests := []struct {
		file         string
		format       Format // FormatUnknown: detect
		maxLine      int
		wantErrs     map[int]error // line → sentinel
		wantWarnings int
		wantNoEvent  int
	}{
		{file: "events.good.jsonl", wantWarnings: 2},
		{file: "events.bad.jsonl", wantErrs: map[int]error{1: ErrBadEvent, 2: ErrBadEvent, 3: ErrBadEvent, 4: ErrNotJSON}},
		{file: "events.good.jsonl", format: FormatEvent, wantWarnings: 2},
		{file: "openai.good.jsonl", wantNoEvent: 1},
		{file: "openai.good.jsonl", format: FormatOpenAI, wantNoEvent: 1},
		{file: "openai.bad.jsonl", wantErrs: map[int]error{1: ErrNoTime, 2: ErrUnsupported, 3: ErrWrongFormat, 4: ErrWrongFormat, 6: ErrBadEnvelope, 7: ErrWrongFormat}},
		{file: "anthropic.good.jsonl", wantNoEvent: 2},
		{file: "anthropic.good.jsonl", format: FormatAnthropic, wantNoEvent: 2},
		{file: "anthropic.bad.jsonl", wantErrs: map[int]error{1: ErrNoTime, 2: ErrWrongFormat, 3: ErrBadEnvelope, 4: ErrBadEnvelope}, wantWarnings: 1},
		{file: "bedrock.good.jsonl", wantNoEvent: 1},
		{file: "bedrock.good.jsonl", format: FormatBedrock, wantNoEvent: 1},
		{file: "bedrock.bad.jsonl", wantErrs: map[int]error{1: ErrNoTime, 2: ErrWrongFormat, 3: ErrWrongFormat}},
		{file: "mcp.good.jsonl", wantNoEvent: 6},
		{file: "mcp.good.jsonl", format: FormatMCP, wantNoEvent: 6},
		{file: "mcp.bad.jsonl", wantErrs: map[int]error{1: ErrWrongFormat, 2: ErrIncompletePagination, 3: ErrNoTime, 4: ErrWrongFormat}, wantNoEvent: 1},
		{file: "otel.good.jsonl", wantNoEvent: 1, wantWarnings: 1},
		{file: "otel.good.jsonl", format: FormatOTel, wantNoEvent: 1, wantWarnings: 1},
		{file: "otel.bad.jsonl", wantErrs: map[int]error{1: ErrWrongFormat, 2: ErrNoTime}},
		// One export per instrumentation (package otlp's fixtures): Vercel AI
		// SDK, instrumentation-openai Chat Completions and Responses (logs),
		// OpenInference, MCP client spans.
		{file: "otel.shapes.jsonl", wantWarnings: 4},
		{file: "otel.shapes.jsonl", format: FormatOTel, wantWarnings: 4},
		{file: "garbage.bad.jsonl", maxLine: 4096, wantErrs: map[int]error{
			1: ErrNotJSON, 2: ErrNotJSON, 3: ErrUnknownFormat, 4: ErrUnknownFormat, 5: ErrNotJSON,
			7: ErrNotJSON, 8: ErrNotJSON, 9: ErrLineTooLong,
		}},
	}
	for _, tt := range tests {
		name := tt.file
		if tt.format != FormatUnknown {
			name += "/forced-" + string(tt.format)
		}
		t.Run(name, func(t *testing.T) {
			r := ingestFile(t, tt.file, tt.format, testDefaults, tt.maxLine)
			want := readWant(t, strings.TrimSuffix(tt.file, ".jsonl")+".want.jsonl")
			checkEvents(t, r.events, want)

			gotErrs := map[int]error{}
			for _, e := range r.errs {
				if _, dup := gotErrs[e.Line]; dup {
					t.Errorf("two errors on line %d", e.Line)
				}
				gotErrs[e.Line] = e
				if e.Source != tt.file {
					t.Errorf("error source %q, want %q", e.Source, tt.file)
				}
				if !strings.HasPrefix(e.Error(), fmt.Sprintf("%s:%d: ", tt.file, e.Line)) {
					t.Errorf("error %q does not start with file:line", e)
				}
			}
			for line, target := range tt.wantErrs {
				got, ok := gotErrs[line]
				switch {
				case !ok:
					t.Errorf("line %d: no error, want %v", line, target)
				case !errors.Is(got, target):
					t.Errorf("line %d: error %v, want %v", line, got, target)
				}
			}
			for line, got := range gotErrs {
				if _, ok := tt.wantErrs[line]; !ok {
					t.Errorf("unexpected error: %v", got)
				}
			}
			if len(r.warnings) != tt.wantWarnings {
				t.Errorf("%d warnings, want %d: %v", len(r.warnings), tt.wantWarnings, r.warnings)
			}
			if r.stats.Errors != len(tt.wantErrs) || r.stats.Warnings != tt.wantWarnings {
				t.Errorf("stats errors %d warnings %d, want %d %d", r.stats.Errors, r.stats.Warnings, len(tt.wantErrs), tt.wantWarnings)
			}
			if r.stats.NoEvent != tt.wantNoEvent {
				t.Errorf("stats: %d lines without event, want %d", r.stats.NoEvent, tt.wantNoEvent)
			}
			if r.stats.EventCount() != len(want) {
				t.Errorf("stats: %d events, want %d", r.stats.EventCount(), len(want))
			}
		})
	}
}

// Contract events pass through byte for byte (blanks and CR trimmed).
func TestEventPassthroughBytes(t *testing.T) {
	r := ingestFile(t, "events.good.jsonl", FormatUnknown, Meta{}, 0)
	b, err := os.ReadFile(filepath.Join("testdata", "events.good.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			lines = append(lines, l)
		}
	}
	if len(r.events) != len(lines) {
		t.Fatalf("%d events for %d lines", len(r.events), len(lines))
	}
	for i, ev := range r.events {
		if !bytes.Equal(ev.Value, lines[i]) {
			t.Errorf("event %d changed:\n got %s\nwant %s", i, ev.Value, lines[i])
		}
	}
	if r.stats.Lines != len(lines) {
		t.Errorf("stats: %d lines, want %d (blank lines are not counted)", r.stats.Lines, len(lines))
	}
}

// Converted JSON keeps the model's text: no HTML escaping, number text
// kept, whitespace compacted.
func TestArgumentsKeepText(t *testing.T) {
	r := ingestFile(t, "openai.good.jsonl", FormatUnknown, testDefaults, 0)
	v := string(r.events[1].Value)
	for _, want := range []string{`"arguments":{"q":"<x> & y","limit":5.0}`} {
		if !strings.Contains(v, want) {
			t.Errorf("%s lacks %s", v, want)
		}
	}
	v = string(r.events[0].Value)
	if !strings.Contains(v, `"arguments":{"owner":"o","repo":"r","title":"t"}`) {
		t.Errorf("arguments not compacted: %s", v)
	}
	if strings.Contains(v, "arguments_raw") {
		t.Errorf("valid arguments also in arguments_raw: %s", v)
	}
	v = string(r.events[2].Value)
	if strings.Contains(v, `"arguments":`) || !strings.Contains(v, `"arguments_raw":"{\"owner\":\"o\",\"repo\":"`) {
		t.Errorf("invalid JSON arguments not in arguments_raw alone: %s", v)
	}
}

// Re-ingesting gives identical events; another source name changes every
// call id (a provider id is not unique: it only leads the id).
func TestDeterministicIDs(t *testing.T) {
	for _, file := range []string{"openai.good.jsonl", "mcp.good.jsonl", "otel.good.jsonl"} {
		a := ingestFile(t, file, FormatUnknown, testDefaults, 0)
		b := ingestFile(t, file, FormatUnknown, testDefaults, 0)
		if !reflect.DeepEqual(a.events, b.events) {
			t.Errorf("%s: two runs differ", file)
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "openai.good.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ids := func(source string) []string {
		sink := &collect{}
		in := &Ingester{Sink: sink, Defaults: testDefaults}
		if _, err := in.Ingest(context.Background(), source, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, ev := range sink.events {
			var v struct {
				EventID string `json:"event_id"`
			}
			if err := json.Unmarshal(ev.Value, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v.EventID)
		}
		return out
	}
	x, y := ids("a.jsonl"), ids("b.jsonl")
	for i := range x {
		if x[i] == y[i] {
			t.Errorf("id %d: %q in both sources", i, x[i])
		}
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		line string
		want Format
	}{
		{`{"type":"call","event_id":"c-1"}`, FormatEvent},
		{`{"type":"listing"}`, FormatEvent},
		{`{"type":"decision","event_id":"d-1"}`, FormatEvent},
		{`{"choices":[]}`, FormatOpenAI},
		{`{"role":"assistant","tool_calls":[]}`, FormatOpenAI},
		{`{"role":"assistant","function_call":{"name":"a"}}`, FormatOpenAI},
		{`{"role":"assistant","content":"hi"}`, FormatOpenAI},
		{`{"type":"message","role":"assistant","content":[]}`, FormatAnthropic},
		{`{"role":"assistant","content":[{"type":"text","text":"x"}]}`, FormatAnthropic},
		{`{"type":"tool_use","id":"t","name":"a","input":{}}`, FormatAnthropic},
		{`{"output":{"message":{"content":[]}}}`, FormatBedrock},
		{`{"role":"assistant","content":[{"text":"x"},{"toolUse":{}}]}`, FormatBedrock},
		{`{"toolUse":{"toolUseId":"a"}}`, FormatBedrock},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{}}`, FormatMCP},
		{`{"id":1,"result":{"tools":[]}}`, FormatMCP},
		{`{"resourceSpans":[]}`, FormatOTel},
		{`{"emitted_at":"x","openai":{}}`, FormatOpenAI},
		{`{"mcp":{"jsonrpc":"2.0"}}`, FormatMCP},
		{`{"otel":{"resourceSpans":[]}}`, FormatOTel},
		{`{"type":"call","openai":{}}`, FormatEvent},
		{`{"openai":"not an object"}`, FormatUnknown},
		{`{}`, FormatUnknown},
		{`{"output":[]}`, FormatUnknown}, // OpenAI Responses API: not supported
		{`[]`, FormatUnknown},
		{`nope`, FormatUnknown},
		{``, FormatUnknown},
	}
	for _, tt := range tests {
		if got := Detect([]byte(tt.line)); got != tt.want {
			t.Errorf("Detect(%s) = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range []string{"", "auto", "AUTO"} {
		if f, err := ParseFormat(s); err != nil || f != FormatUnknown {
			t.Errorf("ParseFormat(%q) = %q, %v", s, f, err)
		}
	}
	for _, f := range Formats() {
		if got, err := ParseFormat(string(f)); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml): no error")
	}
}

// convertOne converts one line with a fresh converter.
func convertOne(t *testing.T, format Format, defaults Meta, line string) ([]Event, error) {
	t.Helper()
	var evs []Event
	c := NewConverter("inline", format, defaults)
	_, err := c.Convert(1, []byte(line), func(ev Event) error { evs = append(evs, ev); return nil })
	if err == nil {
		err = c.Flush(1, func(ev Event) error { evs = append(evs, ev); return nil })
	}
	return evs, err
}

func TestForcedFormatMismatch(t *testing.T) {
	tests := []struct {
		format Format
		line   string
	}{
		{FormatOpenAI, `{"type":"message","content":[{"type":"tool_use"}]}`},
		{FormatAnthropic, `{"choices":[]}`},
		{FormatBedrock, `{"choices":[]}`},
		{FormatMCP, `{"choices":[]}`},
		{FormatOTel, `{"choices":[]}`},
		{FormatOpenAI, `{"emitted_at":"2026-11-29T10:00:00Z","anthropic":{"type":"tool_use","id":"t","name":"a","input":{}}}`},
	}
	for _, tt := range tests {
		_, err := convertOne(t, tt.format, Meta{Time: time.Now()}, tt.line)
		if !errors.Is(err, ErrWrongFormat) {
			t.Errorf("%s on %s: %v, want ErrWrongFormat", tt.format, tt.line, err)
		}
		var le *LineError
		if !errors.As(err, &le) || le.Line != 1 || le.Source != "inline" {
			t.Errorf("%s: error %v is not a LineError of inline:1", tt.format, err)
		}
	}
	// The event adapter refuses what is not an event.
	_, err := convertOne(t, FormatEvent, Meta{}, `{"choices":[]}`)
	if !errors.Is(err, ErrBadEvent) {
		t.Errorf("event on openai line: %v", err)
	}
}

// Precedence: envelope, then the provider object, then the defaults, then
// the format's fallback.
func TestPrecedence(t *testing.T) {
	trust := 3
	defaults := Meta{
		Time:      time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Registry:  "flag-reg",
		AgentID:   "flag-agent",
		SessionID: "flag-session",
		Model:     "flag-model",
		Provider:  "flag-provider",
		Surface:   "flag-surface",
		Server:    "flag-server",
		Trust:     &trust,
		Visible:   []string{"flag-tool"},
	}
	type fields struct {
		EmittedAt string   `json:"emitted_at"`
		Registry  string   `json:"registry"`
		AgentID   string   `json:"agent_id"`
		SessionID string   `json:"session_id"`
		Model     string   `json:"model"`
		Provider  string   `json:"provider"`
		Surface   string   `json:"surface"`
		Server    string   `json:"server"`
		Visible   []string `json:"visible"`
		Trust     int      `json:"trust"`
	}
	tests := []struct {
		name string
		def  Meta
		line string
		want fields
	}{
		{"flags fill what the object lacks", defaults,
			`{"id":"x","created":1764547200,"model":"obj-model","choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"a","arguments":"{}"}}]}}]}`,
			fields{"2025-12-01T00:00:00.000Z", "flag-reg", "flag-agent", "flag-session", "obj-model", "flag-provider", "flag-surface", "flag-server", []string{"flag-tool"}, 0}},
		{"the envelope beats object and flags", defaults,
			`{"emitted_at":"2026-11-29T10:00:00Z","registry":"env-reg","agent_id":"env-agent","session_id":"env-session","model":"env-model","provider":"env-provider","surface":"env-surface","server":"env-server","visible":["env-tool"],"openai":{"created":1764547200,"model":"obj-model","choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"a","arguments":"{}"}}]}}]}}`,
			fields{"2026-11-29T10:00:00.000Z", "env-reg", "env-agent", "env-session", "env-model", "env-provider", "env-surface", "env-server", []string{"env-tool"}, 0}},
		{"format fallbacks come last", Meta{Time: defaults.Time},
			`{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"a","arguments":"{}"}}]}`,
			fields{"2026-01-02T03:04:05.000Z", "", "", "", "", "openai", "raw_json", "", nil, 0}},
		{"mcp fallback surface", Meta{Time: defaults.Time},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}`,
			fields{"2026-01-02T03:04:05.000Z", "", "", "", "", "", "mcp", "", nil, 0}},
		{"listing trust from flags", defaults,
			`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`,
			fields{Registry: "flag-reg", Server: "flag-server", Trust: 3}},
		{"listing trust and time from the envelope", defaults,
			`{"observed_at":"2026-11-29T10:00:00Z","trust":0,"mcp":{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}}`,
			fields{Registry: "flag-reg", Server: "flag-server", Trust: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := convertOne(t, FormatUnknown, tt.def, tt.line)
			if err != nil || len(evs) != 1 {
				t.Fatalf("%d events, %v", len(evs), err)
			}
			var got fields
			if err := json.Unmarshal(evs[0].Value, &got); err != nil {
				t.Fatal(err)
			}
			if evs[0].Kind == KindListing {
				got.EmittedAt = ""
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// An unfinished pagination is reported when the source ends, and an
// interleaved server keeps its own pages.
func TestMCPPaginationFlush(t *testing.T) {
	c := NewConverter("pages", FormatMCP, Meta{Time: time.Unix(0, 0)})
	var evs []Event
	emit := func(ev Event) error { evs = append(evs, ev); return nil }
	lines := []string{
		`{"server":"a","mcp":{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"a1"}],"nextCursor":"c1"}}}`,
		`{"server":"b","mcp":{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"b1"}],"nextCursor":"c2"}}}`,
		`{"server":"a","mcp":{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"a2"}]}}}`,
	}
	for i, l := range lines {
		if _, err := c.Convert(i+1, []byte(l), emit); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
	}
	if len(evs) != 1 || !strings.Contains(string(evs[0].Value), `"tools":[{"name":"a1"},{"name":"a2"}]`) {
		t.Fatalf("merged listing: %d events %+v", len(evs), evs)
	}
	err := c.Flush(3, emit)
	var le *LineError
	if !errors.Is(err, ErrIncompletePagination) || !errors.As(err, &le) || le.Line != 2 {
		t.Fatalf("flush: %v, want incomplete pagination on line 2", err)
	}
	if len(evs) != 1 {
		t.Errorf("partial listing emitted")
	}
	if err := c.Flush(3, emit); err != nil {
		t.Errorf("second flush: %v", err)
	}
}

// A line is all or nothing: one call without a time drops the line's other
// calls too.
func TestLineAtomic(t *testing.T) {
	line := `{"resourceSpans":[{"scopeSpans":[{"spans":[
		{"name":"execute_tool a","startTimeUnixNano":"1764579601250000000","attributes":[{"key":"gen_ai.tool.name","value":{"stringValue":"a"}}]},
		{"name":"execute_tool b","attributes":[{"key":"gen_ai.tool.name","value":{"stringValue":"b"}}]}]}]}]}`
	line = strings.ReplaceAll(line, "\n", "")
	evs, err := convertOne(t, FormatUnknown, Meta{}, line)
	if !errors.Is(err, ErrNoTime) || len(evs) != 0 {
		t.Fatalf("%d events, %v; want none and ErrNoTime", len(evs), err)
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		r.n--
		return copy(p, `{"type":"call","event_id":"c-1","emitted_at":"2026-11-29T10:00:00Z"}`+"\n"), nil
	}
	return 0, errors.New("disk on fire")
}

func TestIngestStops(t *testing.T) {
	t.Run("read error", func(t *testing.T) {
		sink := &collect{}
		in := &Ingester{Sink: sink}
		st, err := in.Ingest(context.Background(), "src", &failingReader{n: 2})
		if !errors.Is(err, ErrRead) || !strings.Contains(err.Error(), "disk on fire") {
			t.Fatalf("err %v, want ErrRead", err)
		}
		if st.Lines != 2 || len(sink.events) != 2 {
			t.Errorf("read %d lines, %d events before the error; want 2, 2", st.Lines, len(sink.events))
		}
	})
	t.Run("sink error", func(t *testing.T) {
		boom := errors.New("broker gone")
		n := 0
		in := &Ingester{Sink: SinkFunc(func(context.Context, Event) error {
			n++
			return boom
		})}
		f, err := os.Open(filepath.Join("testdata", "events.good.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_, err = in.Ingest(context.Background(), "src", f)
		if !errors.Is(err, ErrSink) || !errors.Is(err, boom) {
			t.Fatalf("err %v, want ErrSink wrapping the cause", err)
		}
		if n != 1 {
			t.Errorf("sink called %d times after failing", n)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		in := &Ingester{Sink: &collect{}}
		_, err := in.Ingest(ctx, "src", strings.NewReader(`{"type":"call","event_id":"c"}`))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("no sink", func(t *testing.T) {
		if _, err := (&Ingester{}).Ingest(context.Background(), "src", strings.NewReader("")); err == nil {
			t.Fatal("no error without a sink")
		}
	})
}

func TestReadLines(t *testing.T) {
	input := "\xef\xbb\xbf" + `{"type":"call","event_id":"c-1","emitted_at":"2026-11-29T10:00:00Z"}` + "\r\n" +
		"\n   \n" +
		`{"type":"call","event_id":"c-2","emitted_at":"2026-11-29T10:00:00Z"}`
	sink := &collect{}
	var errs []*LineError
	in := &Ingester{Sink: sink, OnError: func(e *LineError) { errs = append(errs, e) }}
	st, err := in.Ingest(context.Background(), "src", strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if st.Lines != 2 || len(sink.events) != 2 {
		t.Fatalf("%d lines, %d events", st.Lines, len(sink.events))
	}
	if bytes.HasPrefix(sink.events[0].Value, []byte("\xef")) || bytes.HasSuffix(sink.events[0].Value, []byte("\r")) {
		t.Errorf("BOM or CR kept: %q", sink.events[0].Value)
	}

	// Lines longer than bufio's buffer are read whole.
	big := `{"type":"call","event_id":"c-big","emitted_at":"2026-11-29T10:00:00Z","arguments":{"pad":"` + strings.Repeat("y", 200<<10) + `"}}`
	sink = &collect{}
	in = &Ingester{Sink: sink, OnError: func(e *LineError) { t.Errorf("error: %v", e) }}
	if _, err := in.Ingest(context.Background(), "big", strings.NewReader(big+"\n"+big)); err != nil {
		t.Fatal(err)
	}
	if len(sink.events) != 2 || string(sink.events[1].Value) != big {
		t.Fatalf("big lines: %d events", len(sink.events))
	}
}

func TestJSONLSink(t *testing.T) {
	var buf bytes.Buffer
	s := NewJSONLSink(&buf)
	ctx := context.Background()
	for _, v := range []string{`{"a":1}`, `{"b":2}`} {
		if err := s.Append(ctx, Event{Kind: KindCall, Value: []byte(v)}); err != nil {
			t.Fatal(err)
		}
	}
	if buf.Len() != 0 {
		t.Error("written before Flush")
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "{\"a\":1}\n{\"b\":2}\n" {
		t.Errorf("got %q", got)
	}
}

func TestStatsAdd(t *testing.T) {
	var total Stats
	a := Stats{Lines: 2, Errors: 1, Events: map[Kind]int{KindCall: 2}, Formats: map[Format]int{FormatOpenAI: 2}, LineFormats: map[Format]int{FormatOpenAI: 2}}
	total.Add(a)
	total.Add(a)
	if total.Lines != 4 || total.Errors != 2 || total.Events[KindCall] != 4 || total.Formats[FormatOpenAI] != 4 || total.EventCount() != 4 {
		t.Errorf("%+v", total)
	}
}

func TestKindString(t *testing.T) {
	got := []string{KindCall.String(), KindListing.String(), Kind(9).String()}
	sort.Strings(got)
	if strings.Join(got, ",") != "call,kind(9),listing" {
		t.Error(got)
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// TestRepeatedIDs: an event_id repeated in a run is counted, as a repeat
// when the content is the same and as a conflict, reported with where the
// id was first seen, when it differs; the events are all sent. Past
// MaxTrackedIDs, ids are counted as untracked.
func TestRepeatedIDs(t *testing.T) {
	call := `{"type":"call","event_id":"c-1","emitted_at":"2026-11-29T10:00:05.250Z","registry":"r","tool":"t","arguments":{}}`
	other := strings.Replace(call, `"t"`, `"u"`, 1)
	listing := `{"type":"listing","event_id":"c-1","observed_at":"2026-11-29T10:00:00Z","registry":"r","server":"","op":"snapshot","tools":[]}`
	for _, tt := range []struct {
		name                         string
		lines                        []string
		max                          int
		repeats, conflicts, untraced int
		errLine                      int
	}{
		{"distinct", []string{call, listing}, 0, 0, 0, 0, 0},
		{"same event twice", []string{call, call}, 0, 1, 0, 0, 0},
		{"other content", []string{call, listing, other}, 0, 0, 1, 0, 3},
		{"past the bound", []string{call, other, listing}, 1, 0, 1, 1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := &collect{}
			var errs []*LineError
			in := &Ingester{Sink: sink, MaxTrackedIDs: tt.max, OnError: func(e *LineError) { errs = append(errs, e) }}
			st, err := in.Ingest(context.Background(), "f.jsonl", strings.NewReader(strings.Join(tt.lines, "\n")))
			if err != nil {
				t.Fatal(err)
			}
			if st.Repeats != tt.repeats || st.Conflicts != tt.conflicts || st.Untracked != tt.untraced || len(sink.events) != len(tt.lines) {
				t.Errorf("stats %+v, %d events; want %d repeats, %d conflicts, %d untracked, %d events", st, len(sink.events), tt.repeats, tt.conflicts, tt.untraced, len(tt.lines))
			}
			if tt.errLine == 0 {
				if len(errs) != 0 {
					t.Errorf("errors %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Line != tt.errLine || !errors.Is(errs[0], ErrIDConflict) || !strings.Contains(errs[0].Error(), "first seen at f.jsonl:1") {
				t.Errorf("errors %v, want a conflict on line %d", errs, tt.errLine)
			}
		})
	}
}

// TestUnusableTimeStamp: a contract event whose time is unusable is
// stamped with the own time of the event before it in its source (the
// log's order places it, and the partition's timestamps stay in order),
// or, first in its source, with the time of ingestion.
func TestUnusableTimeStamp(t *testing.T) {
	call := func(id, at string) string {
		return `{"type":"call","event_id":"` + id + `","emitted_at":"` + at + `","registry":"r","tool":"t","arguments":{}}`
	}
	lines := []string{call("a", "yesterday"), call("b", "2026-11-29T10:00:05.250Z"), call("c", "2026-13-45T99:00:00Z"), call("d", "2026-11-29T10:00:01+02:00"), call("e", "2026-11-29T09:00:00Z")}
	sink := &collect{}
	start := time.Now()
	if _, err := (&Ingester{Sink: sink}).Ingest(context.Background(), "f", strings.NewReader(strings.Join(lines, "\n"))); err != nil {
		t.Fatal(err)
	}
	prev := time.Date(2026, 11, 29, 10, 0, 5, 250e6, time.UTC)
	for i, want := range []time.Time{{}, prev, prev, prev, time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)} {
		got := sink.events[i].Timestamp
		if want.IsZero() {
			if got.Before(start.Truncate(time.Millisecond)) || got.After(time.Now()) {
				t.Errorf("event %d: %v, want the time of ingestion", i, got)
			}
			continue
		}
		if !got.Equal(want) {
			t.Errorf("event %d: %v, want %v", i, got, want)
		}
	}
}
