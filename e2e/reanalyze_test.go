package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// TestReanalyzeAndDiff: the live pipeline (strict, archiving) decides a
// backlog; a window is decided again in pin-assisted mode; `resolverd
// diff` shows exactly the changes that `resolverd check` gives the same
// calls in the two modes, and gates CI on --max-changed (class changes),
// --max-verdict-changed and, without the window, on the calls absent from
// the re-analysis. A strict
// re-analysis equals the live decisions; running one again adds no
// decision; once Kafka has dropped the calls, the archive gives the same
// decisions as Kafka did.
func TestReanalyzeAndDiff(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 6)
	e.produce("tool-listings", c.listings, 0)
	// As a fleet produces calls: in the order they were emitted, each
	// record stamped with its call's emitted_at (as ingest does; a call
	// without a usable one at the first call's time).
	first := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	var rs []*kgo.Record
	for _, l := range c.calls {
		var m struct {
			EmittedAt any    `json:"emitted_at"`
			Session   string `json:"session_id"`
			Agent     string `json:"agent_id"`
		}
		_ = json.Unmarshal(l, &m)
		s, _ := m.EmittedAt.(string)
		ts, err := schema.ParseTime(s)
		if err != nil {
			ts = first
		}
		rs = append(rs, &kgo.Record{Topic: "tool-calls", Key: []byte(schema.CallKey(m.Session, m.Agent)), Value: l, Timestamp: ts})
	}
	slices.SortStableFunc(rs, func(a, b *kgo.Record) int { return a.Timestamp.Compare(b.Timestamp) })
	if err := e.producer.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d := e.start("--archive-calls")
	e.waitDecided(len(c.calls), 60*time.Second)
	d.stop(t)

	// The window: from the first fleet call at or after 300 ms to the first
	// sample call at or after 10:00 (the calls without a usable emitted_at
	// are out), both bounds a call's emitted_at exactly: the calls at From
	// are in, those at To out.
	at := func(t0 time.Time) time.Time {
		i := slices.IndexFunc(rs, func(r *kgo.Record) bool { return !r.Timestamp.Before(t0) })
		if i < 0 || !rs[i].Timestamp.Equal(rs[i].Timestamp.Truncate(time.Millisecond)) {
			t.Fatalf("no call at a whole millisecond from %v", t0)
		}
		return rs[i].Timestamp
	}
	from, to := at(time.Date(2026, 1, 2, 0, 0, 0, 300e6, time.UTC)), at(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	window := []string{"--from", from.Format(time.RFC3339Nano), "--to", to.Format(time.RFC3339Nano)}
	var inWindow [][]byte
	var atFrom, atTo []string // event ids
	for _, r := range rs {
		if at := r.Timestamp; !at.Before(from) && at.Before(to) {
			inWindow = append(inWindow, r.Value)
		}
		var m struct {
			ID string `json:"event_id"`
		}
		_ = json.Unmarshal(r.Value, &m)
		switch id := m.ID; {
		case r.Timestamp.Equal(from):
			atFrom = append(atFrom, id)
		case r.Timestamp.Equal(to):
			atTo = append(atTo, id)
		}
	}
	if len(atFrom) == 0 || len(atTo) == 0 || slices.Contains(append(atFrom, atTo...), "") {
		t.Fatalf("calls at From %q, at To %q", atFrom, atTo)
	}
	strict, pin := e.checked(c, inWindow, resolve.Strict), e.checked(c, inWindow, resolve.PinAssisted)
	if len(strict) != len(inWindow) || len(inWindow) < 500 || len(inWindow) == len(c.calls) {
		t.Fatalf("%d calls decided by check, %d in the window, of %d", len(strict), len(inWindow), len(c.calls))
	}
	want := map[[2]string]int64{} // (strict class, pin class) -> calls
	verdicts, classes := int64(0), int64(0)
	for id, s := range strict {
		want[[2]string{s, pin[id]}]++
		if (s == "OK") != (pin[id] == "OK") {
			verdicts++
		}
		if s != pin[id] {
			classes++
		}
	}
	if verdicts == 0 {
		t.Fatal("no call of the window changes verdict between the modes: the test would prove nothing")
	}

	out, stderr := e.resolverd(t, 0, append([]string{"reanalyze", "--analysis", "pin", "--mode", "pin-assisted", "--progress-every", "50ms"}, window...)...)
	if !strings.Contains(out, fmt.Sprintf("%d calls emitted in", len(inWindow))) || !strings.Contains(stderr, "records/s") || strings.Contains(out, "NOT PROVEN") {
		t.Fatalf("reanalyze of %d calls:\n%s\n%s", len(inWindow), out, stderr)
	}

	quoted := func(ids []string) string { return "'" + strings.Join(ids, "', '") + "'" }
	if got := e.count("SELECT count() FROM {db}.decisions FINAL WHERE analysis_id = 'pin' AND call_key IN (" + quoted(atFrom) + ")"); got != int64(len(atFrom)) {
		t.Errorf("%d of the %d calls at From decided, want all", got, len(atFrom))
	}
	if got := e.count("SELECT count() FROM {db}.decisions FINAL WHERE analysis_id = 'pin' AND call_key IN (" + quoted(atTo) + ")"); got != 0 {
		t.Errorf("%d of the %d calls at To decided, want none", got, len(atTo))
	}

	// diff, as JSON: the groups are check's, call for call.
	out, _ = e.resolverd(t, 0, append([]string{"diff", "--analysis", "pin", "--against", "live", "--json", "--examples", "2"}, window...)...)
	var rep struct {
		Calls          struct{ Both, Analysis, Against int64 }
		ClassChanged   int64 `json:"class_changed"`
		VerdictChanged int64 `json:"verdict_changed"`
		Groups         []struct {
			Before, After *struct{ Class, Verdict string }
			Calls         int64
			Changed       bool
			Examples      []struct {
				EventID      string `json:"event_id"`
				ReasonBefore string `json:"reason_before"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, out)
	}
	n := int64(len(inWindow))
	if rep.Calls.Both != n || rep.Calls.Analysis != n || rep.Calls.Against != n || rep.VerdictChanged != verdicts || rep.ClassChanged != classes {
		t.Errorf("diff counts %+v, %d verdicts, %d classes changed; want %d calls in both, %d verdicts, %d classes changed", rep.Calls, rep.VerdictChanged, rep.ClassChanged, n, verdicts, classes)
	}
	got := map[[2]string]int64{}
	for _, g := range rep.Groups {
		if g.Before == nil || g.After == nil {
			t.Fatalf("a group with an absent side: %+v", g)
		}
		k := [2]string{g.Before.Class, g.After.Class}
		got[k] = g.Calls
		if g.Changed != (k[0] != k[1]) || len(g.Examples) != int(min(2, g.Calls)) {
			t.Errorf("group %v: changed %v, %d examples", k, g.Changed, len(g.Examples))
		}
		for _, x := range g.Examples {
			if strict[x.EventID] != k[0] || pin[x.EventID] != k[1] {
				t.Errorf("example %s in group %v: check says %s -> %s", x.EventID, k, strict[x.EventID], pin[x.EventID])
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("diff groups\n%v\nresolverd check in both modes\n%v", got, want)
	}

	// The table, and the CI gate.
	out, _ = e.resolverd(t, 0, append([]string{"diff", "--analysis", "pin"}, window...)...)
	if !strings.Contains(out, "M2 reject  ->  OK allow") || !strings.Contains(out, fmt.Sprintf("%d changed verdict", verdicts)) {
		t.Errorf("diff table:\n%s", out)
	}
	e.resolverd(t, 0, append([]string{"diff", "--analysis", "pin", "--max-verdict-changed", fmt.Sprint(verdicts)}, window...)...)
	if _, stderr := e.resolverd(t, 3, append([]string{"diff", "--analysis", "pin", "--max-verdict-changed", fmt.Sprint(verdicts - 1)}, window...)...); !strings.Contains(stderr, "more than --max-verdict-changed") {
		t.Errorf("gate: %s", stderr)
	}
	e.resolverd(t, 0, append([]string{"diff", "--analysis", "pin", "--max-changed", fmt.Sprint(classes)}, window...)...)
	if _, stderr := e.resolverd(t, 3, append([]string{"diff", "--analysis", "pin", "--max-changed", fmt.Sprint(classes - 1)}, window...)...); !strings.Contains(stderr, fmt.Sprintf("%d calls changed class (%d verdict), more than --max-changed", classes, verdicts)) {
		t.Errorf("class gate: %s", stderr)
	}
	// Without the window, every live call outside it is absent from pin.
	if _, stderr := e.resolverd(t, 4, "diff", "--analysis", "pin"); !strings.Contains(stderr, fmt.Sprintf(`%d calls decided in "live" are absent from "pin"`, len(c.calls)-len(inWindow))) || !strings.Contains(stderr, "give the re-analysis's window") {
		t.Errorf("diff without the window: %s", stderr)
	}
	e.resolverd(t, 0, "diff", "--analysis", "pin", "--max-absent", "-1")
	if _, stderr := e.resolverd(t, 1, "diff", "--analysis", "pni"); !strings.Contains(stderr, `"pni" has no decision`) {
		t.Errorf("a misspelt analysis: %s", stderr)
	}

	// Strict again: as live; and once more: no new decision under FINAL.
	for range 2 {
		e.resolverd(t, 0, append([]string{"reanalyze", "--analysis", "strict", "--progress", "none"}, window...)...)
		if out, _ := e.resolverd(t, 0, append([]string{"diff", "--analysis", "strict", "--json"}, window...)...); !strings.Contains(out, `"class_changed": 0,`) || !strings.Contains(out, fmt.Sprintf(`"both": %d`, n)) {
			t.Errorf("strict re-analysis against live:\n%s", out)
		}
		if got := e.count("SELECT count() FROM {db}.decisions FINAL WHERE analysis_id = 'strict'"); got != n {
			t.Errorf("%d decisions of the strict re-analysis under FINAL, want %d", got, n)
		}
	}
	if _, stderr := e.resolverd(t, 2, append([]string{"reanalyze", "--analysis", "live"}, window...)...); !strings.Contains(stderr, "holds decisions of source stream") {
		t.Errorf("reanalyze into the live analysis: %s", stderr)
	}

	// Kafka drops the calls: a read there is unproven (exit 4), and the
	// archive decides the window as Kafka did.
	adm := kadm.NewClient(e.producer)
	ends, err := adm.ListEndOffsets(context.Background(), "tool-calls")
	if err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) { offs.AddOffset("tool-calls", o.Partition, o.Offset, -1) })
	if res, err := adm.DeleteRecords(context.Background(), offs); err != nil || res.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, res.Error())
	}
	if _, stderr := e.resolverd(t, 4, append([]string{"reanalyze", "--analysis", "pin-kafka", "--mode", "pin-assisted"}, window...)...); !strings.Contains(stderr, "were deleted") || !strings.Contains(stderr, "--source archive") {
		t.Errorf("reanalyze of a truncated topic: %s", stderr)
	}
	e.resolverd(t, 0, append([]string{"reanalyze", "--analysis", "pin-archive", "--mode", "pin-assisted", "--source", "archive"}, window...)...)
	if out, _ := e.resolverd(t, 0, append([]string{"diff", "--analysis", "pin-archive", "--against", "pin", "--json", "--max-changed", "0"}, window...)...); !strings.Contains(out, `"class_changed": 0,`) || !strings.Contains(out, fmt.Sprintf(`"both": %d`, n)) || !strings.Contains(out, fmt.Sprintf(`"analysis": %d`, n)) {
		t.Errorf("archive against Kafka:\n%s", out)
	}
	// Every field but the stamps, call by call.
	if got := e.count(`SELECT count() FROM (
		SELECT call_key, groupUniqArray((class, reason, path, resolved_server, resolved_tool, registry_version, drift, current_digest, args_hash, topic, partition, offset, emitted_at)) AS d
		FROM {db}.decisions FINAL WHERE analysis_id IN ('pin', 'pin-archive') GROUP BY call_key HAVING length(d) != 1 OR count() != 2)`); got != 0 {
		t.Errorf("%d calls decided otherwise from the archive", got)
	}
}

// resolverd runs the binary against the environment and wants exit code
// code; it returns stdout and stderr.
func (e *env) resolverd(t *testing.T, code int, args ...string) (string, string) {
	t.Helper()
	args = append(args, "--clickhouse", e.ch.Addr(), "--database", e.db)
	if args[0] == "reanalyze" {
		args = append(args, "--brokers", strings.Join(e.brokers, ","))
	}
	cmd := exec.Command(resolverd, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if got != code {
		t.Fatalf("resolverd %v: exit %d, want %d\n%s\n%s", args, got, code, out.String(), tail(errb.String(), 20))
	}
	return out.String(), errb.String()
}

// count runs a single-number query ({db} is the environment's database).
func (e *env) count(query string) int64 {
	e.t.Helper()
	var n uint64
	if err := e.connect().QueryRow(context.Background(), strings.ReplaceAll(query, "{db}", e.db)).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", query, err)
	}
	return int64(n)
}

// checked decides calls against the corpus's listings with the binary's
// `resolverd check --mode mode`, and returns the class by event id.
func (e *env) checked(c corpus, calls [][]byte, mode resolve.Mode) map[string]string {
	e.t.Helper()
	dir := e.t.TempDir()
	write := func(name string, lines [][]byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
			e.t.Fatal(err)
		}
		return p
	}
	cmd := exec.Command(resolverd, "check", "--quiet", "--mode", mode.String(),
		"--listings", write("listings.jsonl", c.listings), "--calls", write("calls.jsonl", calls))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		e.t.Fatalf("resolverd check --mode %s: %v\n%s", mode, err, errb.String())
	}
	classes := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		classes[field(l, "event_id")] = field(l, "class")
	}
	return classes
}

// TestIngestRepeatedProviderIDs: OpenAI and Anthropic logs whose
// provider tool-call ids repeat across conversations and within one (as
// tau-bench's gpt-4o trajectories do: 134 distinct ids for 1,164 calls)
// go through ingest, the broker and resolverd run: every call keeps a
// decision of its own, the one `resolverd check` gives it; ingesting the
// same files again (once more, and twice in one run) adds nothing.
func TestIngestRepeatedProviderIDs(t *testing.T) {
	t.Parallel() // its own broker and database
	dir, err := filepath.Abs(filepath.Join("testdata", "repeated-ids"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(dir, "openai.jsonl"), filepath.Join(dir, "anthropic.jsonl")}
	const calls = 13                                                                                // 8 OpenAI (one message with two calls of one id), 5 Anthropic (likewise)
	e := newEnv(t, chenginetest.Server(t), 1)                                                       // one partition: a call produced last is decided last
	if err := e.connect().Exec(context.Background(), "DROP DATABASE IF EXISTS "+e.db); err != nil { // a run before (-count)
		t.Fatal(err)
	}
	listings, err := os.ReadFile(filepath.Join(dir, "listings.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	e.produce("tool-listings", bytes.Split(bytes.TrimSpace(listings), []byte("\n")), 0)
	ingest := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(ingestBinary(t), args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("ingest %v: %v\n%s", args, err, errb.String())
		}
		return out.String() + errb.String()
	}
	events := ingest(append([]string{"--dry-run"}, files...)...)
	var lines [][]byte
	ids := map[string]bool{}
	for _, l := range strings.Split(events, "\n") {
		if strings.HasPrefix(l, `{"type":"call"`) {
			lines = append(lines, []byte(l))
			ids[field(l, "event_id")] = true
		}
	}
	if len(lines) != calls || len(ids) != calls {
		t.Fatalf("ingest --dry-run: %d calls, %d distinct ids; want %d of each\n%s", len(lines), len(ids), calls, events)
	}
	want := e.checked(corpus{listings: [][]byte{bytes.TrimSpace(listings)}}, lines, resolve.Strict)
	classes := map[string]int{}
	for _, c := range want {
		classes[c]++
	}
	if len(classes) < 3 {
		t.Fatalf("check's classes %v: the calls that share an id should be decided apart", classes)
	}

	brokers := "--brokers=" + strings.Join(e.brokers, ",")
	ingest(append([]string{brokers}, files...)...)
	d := e.start()
	e.waitDecided(calls, 60*time.Second)
	if out := ingest(append([]string{brokers}, append(files, files[0])...)...); !strings.Contains(out, "8 events repeated an earlier event exactly") {
		t.Errorf("ingest of a file twice in one run:\n%s", out)
	}
	// A last call, after the second ingest's on the one partition: once it
	// is decided, so are they.
	e.produce("tool-calls", [][]byte{[]byte(`{"type":"call","event_id":"last","emitted_at":"2026-11-30T13:00:00.000Z","registry":"fleet-r","tool":"get_user_details","arguments":{"user_id":"x"}}`)}, 0)
	e.waitDecided(calls+1, 60*time.Second)
	d.stop(t)
	rows, err := e.connect().Query(context.Background(), fmt.Sprintf("SELECT event_id, toString(class) FROM %s.decisions FINAL WHERE event_id != 'last'", e.db))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var id, class string
		if err := rows.Scan(&id, &class); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[id]; dup {
			t.Errorf("two decisions of %s", id)
		}
		got[id] = class
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("decisions in ClickHouse\n%v\nresolverd check\n%v", got, want)
	}
}

// TestReanalyzeCompleteness: calls over three hours go through ingest
// (records stamped with their emitted_at, or with the time of ingestion
// when it is unusable), with records out of place between them in three
// partitions: a relay whose clock is 3h ahead (timestamps only), a
// producer 3h ahead (emitted_at and timestamp), a record with no
// timestamp. Re-analysing the middle hour decides exactly its calls, each
// once (the read is not cut short by a timestamp; before, 721 of 1,052
// calls were lost so, with exit 0); the record stamped before its call
// makes the read unproven (exit 4, naming its partition and offset)
// unless --accept-incomplete; the archive decides the same calls as
// Kafka, field for field; the diff lists exactly the changes `resolverd
// check` gives; an analysis that covers half the window fails the gate.
func TestReanalyzeCompleteness(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 3)
	if err := e.connect().Exec(context.Background(), "DROP DATABASE IF EXISTS "+e.db); err != nil { // a run before (-count)
		t.Fatal(err)
	}
	e.produce("tool-listings", c.listings, 0)
	t0 := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	from, to := t0.Add(time.Hour), t0.Add(2*time.Hour)
	window := []string{"--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339)}

	// The calls, re-timed over [t0, t0+3h), a whole millisecond apart at
	// least; some with an unusable emitted_at, one without a tool (it
	// keeps its emitted_at: MALFORMED, in the window).
	var calls [][]byte
	seen := map[string]bool{}
	for _, l := range c.calls {
		id, at := field(string(l), "event_id"), field(string(l), "emitted_at")
		if _, err := schema.ParseTime(at); err != nil || id == "" || seen[id] || !bytes.HasPrefix(l, []byte(`{"type":"call"`)) || bytes.Count(l, []byte(`"emitted_at"`)) != 1 {
			continue
		}
		seen[id] = true
		calls = append(calls, l)
	}
	n := len(calls)
	step := (3 * time.Hour / time.Duration(n)).Truncate(time.Millisecond)
	type placed struct {
		id      string
		emitted time.Time // zero: unusable
		at      time.Time // the window time: emitted, else, as ingest stamps it, the call's before it in its file
		line    []byte
	}
	var all []placed
	mid := n / 2
	var last time.Time
	for i, l := range calls {
		at := t0.Add(time.Duration(i) * step)
		s := at.Format(time.RFC3339Nano)
		p := placed{id: field(string(l), "event_id"), emitted: at}
		switch {
		case i%37 == 5:
			s, p.emitted = "yesterday", time.Time{}
		case i%41 == 7:
			s, p.emitted = "2026-13-45T99:00:00Z", time.Time{}
		case i == n/2:
			l = bytes.Replace(l, []byte(`"tool":`), []byte(`"tool_":`), 1)
		}
		p.line = bytes.Replace(l, []byte(`"emitted_at":"`+field(string(l), "emitted_at")+`"`), []byte(`"emitted_at":"`+s+`"`), 1)
		if i == 0 || i == mid { // the first of a file: stamped at ingestion, outside the window
			last = time.Now()
		}
		if p.at = p.emitted; p.emitted.IsZero() {
			p.at = last
		}
		last = p.at
		all = append(all, p)
	}
	dir := t.TempDir()
	ingest := func(name string, ps []placed) {
		t.Helper()
		var b bytes.Buffer
		for _, p := range ps {
			b.Write(p.line)
			b.WriteByte('\n')
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(ingestBinary(t), "--brokers", strings.Join(e.brokers, ","), path).CombinedOutput(); err != nil {
			t.Fatalf("ingest: %v\n%s", err, out)
		}
	}
	ingest("a.jsonl", all[:mid])
	// Out of place, produced between the halves as live producers would.
	tmpl := all[mid+3]
	special := func(id string, emitted, ts time.Time) (placed, *kgo.Record) {
		l := bytes.Replace(tmpl.line, []byte(`"event_id":"`+tmpl.id+`"`), []byte(`"event_id":"`+id+`"`), 1)
		l = bytes.Replace(l, []byte(`"emitted_at":"`+tmpl.emitted.Format(time.RFC3339Nano)+`"`), []byte(`"emitted_at":"`+emitted.Format(time.RFC3339Nano)+`"`), 1)
		key := schema.CallKey(field(string(l), "session_id"), field(string(l), "agent_id"))
		return placed{id: id, emitted: emitted, at: emitted, line: l}, &kgo.Record{Topic: "tool-calls", Key: []byte(key), Value: l, Timestamp: ts}
	}
	var recs []*kgo.Record
	now := all[mid].emitted
	for i, s := range []struct {
		id          string
		emitted, ts time.Time
	}{
		{"relay-ahead-1", now, now.Add(3 * time.Hour)},
		{"relay-ahead-2", now.Add(time.Second), now.Add(3*time.Hour + time.Second)},
		{"clock-ahead", now.Add(3 * time.Hour), now.Add(3 * time.Hour)},
		{"no-timestamp", now.Add(2 * time.Second), time.UnixMilli(-1)},
	} {
		p, r := special(s.id, s.emitted, s.ts)
		r.Key = []byte(fmt.Sprint("special-", i)) // spread over the partitions
		all = append(all, p)
		recs = append(recs, r)
	}
	if err := e.producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ingest("b.jsonl", all[mid:n])

	var inWindow [][]byte
	want := map[string]bool{}
	malformed := 0
	for _, p := range all {
		if !p.at.Before(from) && p.at.Before(to) {
			want[p.id] = true
			inWindow = append(inWindow, p.line)
			if p.emitted.IsZero() {
				malformed++
			}
		}
	}
	if len(want) < 200 || malformed < 5 || !want["relay-ahead-1"] || !want["no-timestamp"] || want["clock-ahead"] {
		t.Fatalf("%d calls in the window, %d without a usable emitted_at", len(want), malformed)
	}
	d := e.start("--archive-calls")
	e.waitDecided(len(all), 60*time.Second)
	d.stop(t)

	decided := func(analysis string) map[string]bool {
		t.Helper()
		rows, err := e.connect().Query(context.Background(), fmt.Sprintf("SELECT call_key FROM %s.decisions FINAL WHERE analysis_id = '%s'", e.db, analysis))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]bool{}
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				t.Fatal(err)
			}
			if got[k] {
				t.Errorf("%s: %s decided twice", analysis, k)
			}
			got[k] = true
		}
		return got
	}
	same := func(analysis string) {
		t.Helper()
		got := decided(analysis)
		for id := range want {
			if !got[id] {
				t.Errorf("%s: %s of the window not decided", analysis, id)
			}
		}
		for id := range got {
			if !want[id] {
				t.Errorf("%s: %s outside the window decided", analysis, id)
			}
		}
	}

	// The record with no timestamp is read, and makes its partition
	// unproven.
	args := append([]string{"reanalyze", "--analysis", "pin", "--mode", "pin-assisted", "--confirm", "20", "--progress", "none"}, window...)
	out, stderr := e.resolverd(t, 4, args...)
	if !strings.Contains(out, fmt.Sprintf("%d calls emitted in", len(want))) || !strings.Contains(out, "NOT PROVEN") ||
		!regexp.MustCompile(`partition \d: 1 records stamped more than the horizon \(5m0s\) before their call's emitted_at \(1 with no timestamp\), the first at offset \d+`).MatchString(stderr) {
		t.Errorf("reanalyze:\n%s\n%s", out, stderr)
	}
	same("pin")
	e.resolverd(t, 0, append([]string{"reanalyze", "--analysis", "strict", "--confirm", "20", "--progress", "none", "--accept-incomplete"}, window...)...)
	same("strict")
	e.resolverd(t, 0, append([]string{"reanalyze", "--analysis", "pin-archive", "--mode", "pin-assisted", "--source", "archive", "--progress", "none"}, window...)...)
	same("pin-archive")
	if got := e.count(`SELECT count() FROM (
		SELECT call_key, groupUniqArray((class, reason, path, resolved_server, resolved_tool, registry_version, drift, current_digest, args_hash, topic, partition, offset, emitted_at)) AS d
		FROM {db}.decisions FINAL WHERE analysis_id IN ('pin', 'pin-archive') GROUP BY call_key HAVING length(d) != 1 OR count() != 2)`); got != 0 {
		t.Errorf("%d calls decided otherwise from the archive", got)
	}

	// The diff: strict is live's; pin's changes are check's, call for call.
	e.resolverd(t, 0, append([]string{"diff", "--analysis", "strict", "--max-changed", "0"}, window...)...)
	strict, pin := e.checked(c, inWindow, resolve.Strict), e.checked(c, inWindow, resolve.PinAssisted)
	groups := map[[2]string]int64{} // of the calls diff selects: those whose window time is in the window (a call without a usable emitted_at is stored at its record's time)
	classes := int64(0)
	for _, p := range all {
		if want[p.id] {
			groups[[2]string{strict[p.id], pin[p.id]}]++
			if strict[p.id] != pin[p.id] {
				classes++
			}
		}
	}
	out, _ = e.resolverd(t, 0, append([]string{"diff", "--analysis", "pin", "--json"}, window...)...)
	var rep struct {
		Absent       int64 `json:"absent"`
		ClassChanged int64 `json:"class_changed"`
		Groups       []struct {
			Before, After *struct{ Class string }
			Calls         int64
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, out)
	}
	got := map[[2]string]int64{}
	for _, g := range rep.Groups {
		if g.Before == nil || g.After == nil {
			t.Fatalf("a call absent from one analysis: %s", out)
		}
		got[[2]string{g.Before.Class, g.After.Class}] = g.Calls
	}
	if fmt.Sprint(got) != fmt.Sprint(groups) || rep.ClassChanged != classes || rep.Absent != 0 || classes == 0 {
		t.Errorf("diff groups\n%v\nresolverd check in both modes\n%v (%d changed)", got, groups, classes)
	}
	// An analysis of half the window: the gate fails, whatever changed.
	half := from.Add(30 * time.Minute)
	e.resolverd(t, 0, "reanalyze", "--analysis", "half", "--from", from.Format(time.RFC3339), "--to", half.Format(time.RFC3339), "--progress", "none", "--accept-incomplete")
	absent := 0
	for _, p := range all {
		if want[p.id] && !p.at.Before(half) { // diff selects by the stored emitted_at: the window time
			absent++
		}
	}
	if _, stderr := e.resolverd(t, 4, append([]string{"diff", "--analysis", "half", "--max-changed", "1000"}, window...)...); !strings.Contains(stderr, fmt.Sprintf(`%d calls decided in "live" are absent from "half"`, absent)) {
		t.Errorf("the gate on half the window: %s", stderr)
	}
}
