package check

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func corpus(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata", "corpus"}, parts...)...)
}

func load(t testing.TB, files ...string) *registry.Snapshot {
	t.Helper()
	s := registry.New()
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		st, err := LoadListings(fh, s, nil)
		fh.Close()
		if err != nil || st.Bad != 0 || st.Issues != 0 {
			t.Fatalf("LoadListings(%s) = %+v, %v", f, st, err)
		}
	}
	return s.Snapshot()
}

type expected struct {
	EventID string `json:"event_id"`
	Class   string `json:"class"`
	Verdict string `json:"verdict"`
	Drift   bool   `json:"drift"`
}

func decisions(t testing.TB, out []byte) []map[string]any {
	t.Helper()
	var ds []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var d map[string]any
		if err := json.Unmarshal(l, &d); err != nil {
			t.Fatalf("bad decision line %q: %v", l, err)
		}
		ds = append(ds, d)
	}
	return ds
}

// TestCheckCorpus: the shared sample (every class) and BFCL (honest calls
// labelled by others) decided exactly as labelled, in input order.
func TestCheckCorpus(t *testing.T) {
	for _, part := range []string{"sample", "bfcl"} {
		t.Run(part, func(t *testing.T) {
			snap := load(t, corpus(part, "listings.jsonl"))
			calls, err := os.ReadFile(corpus(part, "calls.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			sum, err := Check(context.Background(), Config{Workers: 3, ChunkBytes: 4096}, snap, bytes.NewReader(calls), &out)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := os.ReadFile(corpus(part, "expected.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			ds := decisions(t, out.Bytes())
			lines := bytes.Split(bytes.TrimSpace(exp), []byte("\n"))
			if len(ds) != len(lines) || sum.Calls != len(lines) {
				t.Fatalf("%d decisions, summary %d, want %d", len(ds), sum.Calls, len(lines))
			}
			for i, l := range lines {
				var e expected
				if err := json.Unmarshal(l, &e); err != nil {
					t.Fatal(err)
				}
				d := ds[i]
				if d["event_id"] != e.EventID || d["class"] != e.Class || d["verdict"] != e.Verdict || d["drift"] != e.Drift {
					t.Errorf("line %d: got %v, want %+v", i+1, d, e)
				}
			}
		})
	}
}

func TestCheckLines(t *testing.T) {
	snap := load(t, corpus("sample", "listings.jsonl"))
	good := `{"type":"call","event_id":"c-%d","emitted_at":"2026-12-01T00:14:16.129Z","registry":"bfcl-simple_python_207","tool":"calculate_shortest_distance","arguments":{"start_location":"a","end_location":"b","route_preference":"Shortest"}}`
	var in strings.Builder
	var want []string
	for i := range 300 {
		switch i % 10 {
		case 3:
			in.WriteString("\n   \n") // blank lines are not calls
		case 5:
			fmt.Fprintf(&in, "{not json %d\n", i)
			want = append(want, "MALFORMED:")
			continue
		case 7:
			in.WriteString(`{"event_id":"long","pad":"` + strings.Repeat("x", 5000) + `"}` + "\n")
			want = append(want, "MALFORMED:")
			continue
		}
		fmt.Fprintf(&in, good+"\n", i)
		want = append(want, fmt.Sprintf("OK:c-%d", i))
	}
	in.WriteString(fmt.Sprintf(good, 999)) // no final newline
	want = append(want, "OK:c-999")
	var out bytes.Buffer
	sum, err := Check(context.Background(), Config{Workers: 4, ChunkBytes: 1000, MaxLine: 4096}, snap, strings.NewReader(in.String()), &out)
	if err != nil {
		t.Fatal(err)
	}
	ds := decisions(t, out.Bytes())
	if len(ds) != len(want) || sum.Calls != len(want) {
		t.Fatalf("%d decisions (summary %d), want %d", len(ds), sum.Calls, len(want))
	}
	for i, d := range ds {
		if got := fmt.Sprintf("%s:%s", d["class"], d["event_id"]); got != want[i] {
			t.Fatalf("decision %d = %s, want %s (%v)", i, got, want[i], d)
		}
	}
	if sum.ByClass[schema.Malformed] != 60 || !strings.Contains(out.String(), "line longer than 4096 bytes") {
		t.Fatalf("summary %+v", sum)
	}
}

// synthetic produces n call lines without holding them.
type synthetic struct {
	n, i int
	buf  []byte
}

func (s *synthetic) Read(p []byte) (int, error) {
	for len(s.buf) < len(p) && s.i < s.n {
		s.buf = fmt.Appendf(s.buf, `{"type":"call","event_id":"c-%d","emitted_at":"2026-12-01T00:14:16.129Z","registry":"bfcl-simple_python_207","tool":"calculate_shortest_distance","arguments":{"start_location":"New York, USA","end_location":"Miami, USA","route_preference":"Shortest"}}`+"\n", s.i)
		s.i++
	}
	if len(s.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, s.buf)
	s.buf = s.buf[:copy(s.buf, s.buf[n:])]
	return n, nil
}

type countingWriter struct{ lines atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.lines.Add(int64(bytes.Count(p, []byte("\n"))))
	return len(p), nil
}

// TestCheckMillionCallsBoundedMemory streams a million calls; the heap
// stays small because only the chunks in flight are held.
func TestCheckMillionCallsBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	snap := load(t, corpus("sample", "listings.jsonl"))
	const n = 1_000_000
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	w := &countingWriter{}
	sum, err := Check(context.Background(), Config{}, snap, bufio.NewReader(&synthetic{n: n}), w)
	close(stop)
	<-sampled
	if err != nil {
		t.Fatal(err)
	}
	if sum.Calls != n || w.lines.Load() != n || sum.ByClass[schema.OK] != n {
		t.Fatalf("summary %+v, %d lines written", sum, w.lines.Load())
	}
	t.Logf("peak heap in use: %.1f MiB for %d calls (~%d MiB of input)", float64(peak.Load())/(1<<20), n, 230*n>>20)
	if peak.Load() > 64<<20 {
		t.Fatalf("peak heap %d MiB: the calls are being held", peak.Load()>>20)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }

func TestCheckStopsOnWriteErrorAndCancel(t *testing.T) {
	snap := load(t, corpus("sample", "listings.jsonl"))
	_, err := Check(context.Background(), Config{}, snap, &synthetic{n: 100000}, failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Check(ctx, Config{}, snap, &synthetic{n: 100000}, io.Discard); err == nil {
		t.Fatal("a cancelled check returned no error")
	}
}

func TestPinAssistedMode(t *testing.T) {
	snap := load(t, corpus("sample", "listings.jsonl"))
	calls, err := os.ReadFile(corpus("sample", "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := Check(context.Background(), Config{Resolver: resolve.Resolver{Mode: resolve.PinAssisted}}, snap, bytes.NewReader(calls), &out)
	if err != nil {
		t.Fatal(err)
	}
	// Pin-assisted resolves the sample's 8 same-trust collisions (M2). One
	// of those names is also provided by a trust-0 hub: once the tie is
	// resolved, that shadow makes it M3, which stays rejected.
	if sum.ByClass[schema.M2] != 0 || sum.ByClass[schema.M3] != 7 || sum.ByClass[schema.OK] != 174 {
		t.Fatalf("pin-assisted summary %v", sum.ByClass)
	}
}

// TestCheckBOMAndLongLines: a byte order mark at the start of the calls
// and of the listings is skipped; lines longer than LongLine go through
// the shared decoder and keep their place; with a key, decisions carry
// the keyed args_hash.
func TestCheckBOMAndLongLines(t *testing.T) {
	bom := "\xef\xbb\xbf"
	listing := `{"type":"listing","event_id":"l1","observed_at":"2026-01-01T00:00:00Z","registry":"r1","server":"","op":"snapshot","tools":[{"name":"t","inputSchema":{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}}}]}`
	s := registry.New()
	st, err := LoadListings(strings.NewReader(bom+listing+"\n"), s, nil)
	if err != nil || st.Applied != 1 || st.Bad != 0 {
		t.Fatalf("LoadListings = %+v, %v", st, err)
	}
	long := func(id string, last string) string {
		return `{"type":"call","event_id":"` + id + `","emitted_at":"2026-06-01T00:00:00Z","registry":"r1","tool":"t","arguments":{"a":[` +
			strings.Repeat("1,", LongLine/2) + last + `]}}`
	}
	short := `{"type":"call","event_id":"s%d","emitted_at":"2026-06-01T00:00:00Z","registry":"r1","tool":"t","arguments":{"a":[1]}}`
	var in strings.Builder
	in.WriteString(bom)
	var want []string
	for i := range 12 {
		switch i % 4 {
		case 1:
			in.WriteString(long(fmt.Sprintf("l%d", i), "1") + "\n")
			want = append(want, fmt.Sprintf("OK:l%d", i))
		case 3:
			in.WriteString(long(fmt.Sprintf("l%d", i), `"x"`) + "\n")
			want = append(want, fmt.Sprintf("H3:l%d", i))
		default:
			fmt.Fprintf(&in, short+"\n", i)
			want = append(want, fmt.Sprintf("OK:s%d", i))
		}
	}
	key, err := schema.NewArgsKey([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Check(context.Background(), Config{Workers: 3, ChunkBytes: 1000, ArgsKey: key}, s.Snapshot(), strings.NewReader(in.String()), &out); err != nil {
		t.Fatal(err)
	}
	ds := decisions(t, out.Bytes())
	if len(ds) != len(want) {
		t.Fatalf("%d decisions, want %d", len(ds), len(want))
	}
	for i, d := range ds {
		if got := fmt.Sprintf("%s:%s", d["class"], d["event_id"]); got != want[i] {
			t.Errorf("decision %d = %s, want %s", i, got, want[i])
		}
		if h, _ := d["args_hash"].(string); !strings.HasPrefix(h, "hmac-sha256:"+key.ID()+":") {
			t.Errorf("decision %d args_hash %q", i, h)
		}
	}
	if ds[0]["args_hash"] != ds[2]["args_hash"] || ds[0]["args_hash"] == ds[1]["args_hash"] {
		t.Error("args_hash does not follow the arguments")
	}
}

// TestCheckBoundsWorkers: an absurd worker count is cut to MaxWorkers
// instead of starting millions of goroutines.
func TestCheckBoundsWorkers(t *testing.T) {
	snap := load(t, corpus("sample", "listings.jsonl"))
	before := runtime.NumGoroutine()
	var peak atomic.Int64
	w := writerFunc(func(p []byte) (int, error) {
		peak.Store(max(peak.Load(), int64(runtime.NumGoroutine())))
		return len(p), nil
	})
	sum, err := Check(context.Background(), Config{Workers: 3_000_000}, snap, &synthetic{n: 2000}, w)
	if err != nil || sum.Calls != 2000 {
		t.Fatalf("%+v, %v", sum, err)
	}
	if p := peak.Load(); p > int64(before+MaxWorkers+8) {
		t.Fatalf("%d goroutines", p)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestLoadListingsLongLine: a listing line longer than DefaultMaxLine is
// a bad line, not a read of unbounded size.
func TestLoadListingsLongLine(t *testing.T) {
	good := `{"type":"listing","event_id":"l1","observed_at":"2026-01-01T00:00:00Z","registry":"r1","tools":[]}`
	in := good + "\n" + `{"pad":"` + strings.Repeat("x", DefaultMaxLine) + `"}` + "\n" + strings.Replace(good, "l1", "l2", 1)
	st, err := LoadListings(strings.NewReader(in), registry.New(), nil)
	if err != nil || st.Lines != 3 || st.Applied != 2 || st.Bad != 1 {
		t.Fatalf("LoadListings = %+v, %v", st, err)
	}
}
