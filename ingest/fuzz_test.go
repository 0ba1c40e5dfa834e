package ingest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzConvert: any line converts or is refused, in bounded time and
// without a panic, and every event converted from a provider's object is
// JSON text (a contract event passes through as it came, and a model's
// arguments as the model wrote them: the resolver judges both).
func FuzzConvert(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for sc := bufio.NewScanner(bytes.NewReader(b)); sc.Scan(); {
			f.Add(append([]byte(nil), sc.Bytes()...))
		}
	}
	f.Fuzz(func(tt *testing.T, line []byte) {
		c := NewConverter("fuzz", FormatUnknown, Meta{Time: time.Unix(1764000000, 0), Registry: "fleet"})
		check := func(ev Event) error {
			if bytes.Equal(ev.Value, bytes.TrimSpace(line)) {
				return nil // passed through
			}
			if !json.Valid(ev.Value) {
				tt.Fatalf("event %q of line %q: not JSON", ev.Value, line)
			}
			return nil
		}
		if _, err := c.Convert(1, line, check); err == nil {
			_ = c.Flush(1, check)
		}
	})
}
