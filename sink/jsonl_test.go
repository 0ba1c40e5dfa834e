package sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func jsonlRows() []schema.Row {
	a := fullRow(1)
	a.EmittedAt = time.Date(2026, 11, 29, 10, 0, 5, 250_000_001, time.FixedZone("X", -7200))
	b := schema.Row{CallKey: "kafka:tool-calls/3/17", AnalysisID: "an"} // zero times, empty strings
	b.Set(schema.Malformed, "emitted_at missing")
	c := fullRow(2)
	c.Reason = "nul\x00 tab\t nl\n quote\" bs\\ \u2028 <&>"
	c.Partition, c.Offset = -1, 1<<62
	return []schema.Row{a, b, c}
}

func TestJSONLRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	j := NewJSONL(&buf)
	rows := jsonlRows()
	mustWrite(t, j, rows[:1])
	mustWrite(t, j, rows[1:])
	mustWrite(t, j, nil)
	got, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	want := jsonlRows()
	want[0].EmittedAt = want[0].EmittedAt.UTC()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

// TestJSONLGolden pins the line format (go test -update rewrites it).
func TestJSONLGolden(t *testing.T) {
	var buf bytes.Buffer
	mustWrite(t, NewJSONL(&buf), jsonlRows())
	path := filepath.Join("testdata", "rows.jsonl")
	if *update {
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("output differs from %s:\n%s", path, buf.Bytes())
	}
}

// A JSONL sink line is a superset of the spec's decision line.
func TestJSONLDecisionSuperset(t *testing.T) {
	r := fullRow(1)
	var line, dec map[string]any
	if err := json.Unmarshal(AppendJSON(nil, &r), &line); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.Decision.AppendJSON(nil), &dec); err != nil {
		t.Fatal(err)
	}
	for k, v := range dec {
		if !reflect.DeepEqual(line[k], v) {
			t.Errorf("%s: line has %v, decision %v", k, line[k], v)
		}
	}
}

func TestJSONLConcurrent(t *testing.T) {
	var buf bytes.Buffer
	bw := bufio.NewWriterSize(&buf, 512) // Write must flush it
	j := NewJSONL(bw)
	const writers, batches, size = 4, 50, 20
	var wg sync.WaitGroup
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				rows := make([]schema.Row, size)
				for i := range rows {
					rows[i].CallKey = fmt.Sprintf("%d/%d/%d", g, b, i)
				}
				if err := j.Write(context.Background(), rows); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	got, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers*batches*size {
		t.Fatalf("%d rows, want %d", len(got), writers*batches*size)
	}
	// Batches never interleave: each run of size rows is one batch, in order.
	for i := 0; i < len(got); i += size {
		var g, b int
		fmt.Sscanf(got[i].CallKey, "%d/%d/", &g, &b)
		for k := 0; k < size; k++ {
			if want := fmt.Sprintf("%d/%d/%d", g, b, k); got[i+k].CallKey != want {
				t.Fatalf("row %d: %s, want %s", i+k, got[i+k].CallKey, want)
			}
		}
	}
}

// failingWriter takes half of the first write, then fails it.
type failingWriter struct {
	buf    bytes.Buffer
	failed bool
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if !f.failed {
		f.failed = true
		f.buf.Write(p[:len(p)/2])
		return len(p) / 2, errors.New("disk full")
	}
	return f.buf.Write(p)
}

func TestJSONLPartialWrite(t *testing.T) {
	var f failingWriter
	j := NewJSONL(&f)
	rows := jsonlRows()
	err := j.Write(context.Background(), rows)
	if err == nil || !IsRetryable(err) {
		t.Fatalf("partial write: %v, want a retryable error", err)
	}
	mustWrite(t, j, rows) // the retry starts a new line
	// What the failed write left (whole lines and one cut short) stays on
	// lines of its own; the retry's lines all parse.
	lines := strings.Split(strings.TrimSuffix(f.buf.String(), "\n"), "\n")
	broken := 0
	for _, l := range lines {
		if !json.Valid([]byte(l)) {
			broken++
		}
	}
	if broken != 1 {
		t.Errorf("%d broken lines, want 1", broken)
	}
	good, err := ReadJSONL(strings.NewReader(strings.Join(lines[len(lines)-len(rows):], "\n")))
	if err != nil || !reflect.DeepEqual(good[1:], rows[1:]) {
		t.Fatalf("retried rows: %d, %v", len(good), err)
	}
}

func TestJSONLFileSync(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "d.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mustWrite(t, NewJSONL(f, WithSync()), jsonlRows())
	b, _ := os.ReadFile(f.Name())
	if n := bytes.Count(b, []byte("\n")); n != 3 {
		t.Fatalf("%d lines on disk, want 3", n)
	}
}

func TestJSONLCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var buf bytes.Buffer
	err := NewJSONL(&buf).Write(ctx, jsonlRows())
	if Kind(err) != KindCanceled || buf.Len() != 0 {
		t.Fatalf("canceled: kind %q, %d bytes written", Kind(err), buf.Len())
	}
}
