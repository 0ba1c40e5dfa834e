package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Hostile input (issue 10): every shape that crashed `resolverd check`, ran
// for minutes or took gigabytes gets a decision, each file within 10 s and
// 512 MB of RSS, measured on the real binary.
const (
	hostileTime = 10 * time.Second
	hostileRSS  = 512 << 20
)

// want is the decision expected for one call line, in input order.
type want struct {
	id, class, reason string
}

type hostileCase struct {
	name   string
	input  func() (listings, calls []byte) // built when the case runs
	want   []want
	stderr []string // substrings of the listing warnings
}

func files(listings, calls []byte) func() ([]byte, []byte) {
	return func() ([]byte, []byte) { return listings, calls }
}

// fixture reads testdata/hostile/<name>.{listings,calls,want}.jsonl: the
// two files `check` reads and the decision expected for each call line
// (event_id, class, a substring of the reason).
func fixture(t *testing.T, name string, stderr ...string) hostileCase {
	t.Helper()
	read := func(kind string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "hostile", name+"."+kind+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tc := hostileCase{name: name, input: files(read("listings"), read("calls")), stderr: stderr}
	for _, line := range bytes.Split(bytes.TrimSpace(read("want")), []byte("\n")) {
		var w struct {
			EventID string `json:"event_id"`
			Class   string `json:"class"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatal(err)
		}
		tc.want = append(tc.want, want{w.EventID, w.Class, w.Reason})
	}
	return tc
}

const oneTool = `{"type":"listing","event_id":"l1","observed_at":"2026-01-01T00:00:00Z","registry":"r1","server":"","op":"snapshot","tools":[{"name":"t","inputSchema":%s}]}` + "\n"

// bigCall is a call to t whose arguments are {"a":[item,item,...]} of
// about n bytes; items(i) writes item i.
func bigCall(id string, n int, item func(b *bytes.Buffer, i int)) []byte {
	var b bytes.Buffer
	b.Grow(n + 200)
	b.WriteString(`{"type":"call","event_id":"` + id + `","emitted_at":"2026-06-01T00:00:00Z","registry":"r1","tool":"t","arguments":{"a":[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		item(&b, i)
	}
	b.WriteString("]}}\n")
	return b.Bytes()
}

func ones(b *bytes.Buffer, _ int) { b.WriteByte('1') }

func hostileCases(t *testing.T) []hostileCase {
	cases := []hostileCase{
		fixture(t, "ref-cycles",
			"inputSchema/$defs/a/$ref: reference cycle that consumes no data: #/$defs/a -> #/$defs/a; it matches no value",
			"inputSchema/$defs/a/$ref: reference cycle that consumes no data: #/$defs/a -> #/$defs/a/not -> #/$defs/a", "issues=4"),
		fixture(t, "repeated-call-members"),
		fixture(t, "repeated-listing-members", "repeated member name at /registry", "repeated member name at /tools",
			"repeated member name at /tools/0/name", "repeated member name at /tools/1/inputSchema/properties/q/type",
			"observed_at outside the supported range", "applied=1 bad=5"),
		fixture(t, "odd-inputs"), // times, nesting, UTF-8, a BOM before both files
	}

	arr := []byte(fmt.Sprintf(oneTool, `{"type":"object","properties":{"a":{"type":"array"}}}`))
	cases = append(cases,
		hostileCase{name: "15 MB of [1,1,...]", input: func() ([]byte, []byte) { return arr, bigCall("ones", 15<<20, ones) },
			want: []want{{"ones", "OK", ""}}},
		hostileCase{name: "four 15 MB lines", input: func() ([]byte, []byte) { return arr, bytes.Repeat(bigCall("ones", 15<<20, ones), 4) },
			want: []want{{"ones", "OK", ""}, {"ones", "OK", ""}, {"ones", "OK", ""}, {"ones", "OK", ""}}},
		hostileCase{name: "11 MB of [{},{},...]", input: func() ([]byte, []byte) {
			return arr, bigCall("objs", 11<<20, func(b *bytes.Buffer, _ int) { b.WriteString("{}") })
		}, want: []want{{"objs", "OK", ""}}},
	)

	uniq := []byte(fmt.Sprintf(oneTool, `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`))
	distinct := func(b *bytes.Buffer, i int) { fmt.Fprint(b, i) }
	cases = append(cases, hostileCase{name: "uniqueItems, 200,000 distinct items", input: func() ([]byte, []byte) {
		return uniq, append(bigCall("uniq", 1_300_000, distinct), bigCall("dup", 1_300_000, func(b *bytes.Buffer, i int) {
			if b.Len() > 1_299_990 {
				b.WriteString("5.0") // equal to item 5
				return
			}
			fmt.Fprint(b, i)
		})...)
	}, want: []want{{"uniq", "OK", ""}, {"dup", "H3", "items are not unique"}}})

	var keys bytes.Buffer
	keys.WriteString(`{"type":"call","event_id":"keys","emitted_at":"2026-06-01T00:00:00Z","registry":"r1","tool":"t","arguments":{`)
	for i := range 100_000 {
		if i > 0 {
			keys.WriteByte(',')
		}
		fmt.Fprintf(&keys, `"k%d":%d`, i, i)
	}
	keys.WriteString("}}\n")
	cases = append(cases,
		hostileCase{name: "100,000 distinct keys, closed", input: files([]byte(fmt.Sprintf(oneTool, `{"type":"object","properties":{"q":{}}}`)), keys.Bytes()),
			want: []want{{"keys", "H2", "undeclared argument"}}},
		hostileCase{name: "100,000 distinct keys, open", input: files([]byte(fmt.Sprintf(oneTool, `{"type":"object","additionalProperties":{"type":"integer"}}`)), keys.Bytes()),
			want: []want{{"keys", "OK", ""}}},
	)

	// Beyond the issue: checking that would cost 2^depth (two anyOf
	// branches recursing into the same data) or a pattern's program size
	// per byte of a long string.
	expo := []byte(fmt.Sprintf(oneTool, `{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"anyOf":[
		{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["z"]},{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["y"]}]}}}`))
	expo = append(bytes.ReplaceAll(expo[:len(expo)-1], []byte("\n"), nil), '\n')
	deep := `{"type":"call","event_id":"expo","emitted_at":"2026-06-01T00:00:00Z","registry":"r1","tool":"t","arguments":` +
		strings.Repeat(`{"n":`, 120) + `{}` + strings.Repeat("}", 120) + "}\n"
	pat := []byte(fmt.Sprintf(oneTool, `{"type":"object","properties":{"s":{"type":"string","pattern":".*a.{900}c"}}}`))
	long := `{"type":"call","event_id":"pat","emitted_at":"2026-06-01T00:00:00Z","registry":"r1","tool":"t","arguments":{"s":"` + strings.Repeat("a", 1<<20) + `"}}` + "\n"
	cases = append(cases,
		hostileCase{name: "exponential schema", input: files(expo, []byte(deep)), want: []want{{"expo", "H3", "too costly"}}},
		hostileCase{name: "costly pattern", input: files(pat, []byte(long)), want: []want{{"pat", "H3", "too costly"}}},
	)
	return cases
}

// TestHostileCheck runs `resolverd check` on each hostile input and checks
// every decision, the listing warnings, the time and the peak RSS. The
// peak is the child's ru_maxrss, which Linux takes at least as high as
// this process's RSS when it forked: an upper bound, so the inputs are
// written out and dropped before the child starts.
func TestHostileCheck(t *testing.T) {
	for _, tc := range hostileCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lf, cf := filepath.Join(dir, "listings.jsonl"), filepath.Join(dir, "calls.jsonl")
			listings, calls := tc.input()
			size := len(listings) + len(calls)
			if err := os.WriteFile(lf, listings, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cf, calls, 0o644); err != nil {
				t.Fatal(err)
			}
			listings, calls = nil, nil
			debug.FreeOSMemory()
			ctx, cancel := context.WithTimeout(context.Background(), hostileTime)
			defer cancel()
			cmd := exec.CommandContext(ctx, resolverd, "check", "--listings", lf, "--calls", cf)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			start := time.Now()
			err := cmd.Run()
			took := time.Since(start)
			if ctx.Err() != nil {
				t.Fatalf("not decided within %s", hostileTime)
			}
			if err != nil {
				t.Fatalf("resolverd check: %v\n%s", err, tail(errb.String(), 2000))
			}
			rss := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
			t.Logf("%s, %d MiB of input: %s, peak RSS %d MiB", tc.name, size>>20, took.Round(time.Millisecond), rss>>20)
			if rss > hostileRSS {
				t.Errorf("peak RSS %d MiB, more than %d MiB", rss>>20, hostileRSS>>20)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("%d decisions, want %d:\n%s", len(lines), len(tc.want), tail(out.String(), 3000))
			}
			for i, line := range lines {
				var d struct {
					EventID string `json:"event_id"`
					Class   string `json:"class"`
					Reason  string `json:"reason"`
				}
				if err := json.Unmarshal([]byte(line), &d); err != nil {
					t.Fatalf("decision %d: %v: %s", i, err, line)
				}
				w := tc.want[i]
				if d.EventID != w.id || d.Class != w.class || !strings.Contains(d.Reason, w.reason) {
					t.Errorf("decision %d = %s %s %q, want %s %s %q", i, d.EventID, d.Class, d.Reason, w.id, w.class, w.reason)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, tail(errb.String(), 3000))
				}
			}
		})
	}
}

// TestHostileWorkers: an absurd worker count is a usage error.
func TestHostileWorkers(t *testing.T) {
	out, err := exec.Command(resolverd, "check", "--workers", "3000000", "--listings", "/dev/null", "--calls", "/dev/null").CombinedOutput()
	var ee *exec.ExitError
	if !errorsAs(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "--workers 3000000: want 1 to 256") {
		t.Fatalf("err %v: %s", err, out)
	}
}

func errorsAs(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}
