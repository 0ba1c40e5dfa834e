package callpath_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/callpath"
	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/internal/testkit/kafkatest"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	sampleOnce  sync.Once
	sampleStore *registry.Store
	sampleCalls map[string][]byte // by event id
)

// sample is the shared sample corpus: its registry history and its
// calls by event id.
func sample(t *testing.T) (*registry.Store, map[string][]byte) {
	t.Helper()
	sampleOnce.Do(func() {
		s := registry.New()
		if _, err := check.LoadListingsFile("../testdata/corpus/sample/listings.jsonl", s, nil); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile("../testdata/corpus/sample/calls.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		calls := map[string][]byte{}
		for l := range bytes.Lines(b) {
			var c struct {
				EventID string `json:"event_id"`
			}
			if json.Unmarshal(l, &c) == nil {
				calls[c.EventID] = bytes.TrimSpace(l)
			}
		}
		sampleStore, sampleCalls = s, calls
	})
	if sampleStore == nil {
		t.Fatal("no sample")
	}
	return sampleStore, sampleCalls
}

func step(mode resolve.Mode) callpath.Step {
	return callpath.Step{Resolver: resolve.Resolver{Mode: mode}, Hints: suggest.New(),
		Source: schema.SourceAPI, Action: schema.ActionObserved, ResolverBuild: "test-build", PolicyVersion: mode.String()}
}

// TestDecide: a call decided, hinted and answered by the step: the record
// carries the event as received, the call's key, the decision, the
// step's stamps and decided_at now in UTC; a rejection its hints and
// suggested_tool, an acceptance none; and the answer is the record's
// decision object with source, action and hints.
func TestDecide(t *testing.T) {
	store, calls := sample(t)
	st := step(resolve.Strict)
	for _, tc := range []struct {
		name, id string
		event    []byte // when not a sample call
		class    schema.Class
		key      string
		hints    string
		tool     string // suggested_tool
	}{
		{name: "OK", id: "c-362ad8", class: schema.OK, key: "s-a72991b9", hints: `{}`},
		{name: "H1", id: "c-f678ef", class: schema.H1, key: "s-85e9251c", hints: `{"tools":["play_spotify_song"]}`, tool: "play_spotify_song"},
		{name: "H2", id: "c-bd1f03", class: schema.H2, key: "s-7172a558", hints: `{"keys":["csv_file_path"],"missing":["csv_file_path"]}`},
		{name: "MALFORMED", event: []byte(`{"event_id":"c-x","agent_id":"a-9",`), class: schema.Malformed, hints: `{}`},
		{name: "MALFORMED with a key", event: []byte(`{"event_id":"c-y","agent_id":"a-9","tool":7}`), class: schema.Malformed, key: "a-9", hints: `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			event := tc.event
			if event == nil {
				event = calls[tc.id]
				if event == nil {
					t.Fatalf("no call %s in the sample", tc.id)
				}
			}
			var dec schema.CallDecoder
			var c schema.Call
			var rec audit.Record
			rec.SuggestedTool = "left over" // Decide replaces the record whole
			vs := store.Snapshot()
			before := time.Now()
			st.Decide(vs, &dec, event, &c, &rec)
			after := time.Now()
			h := st.Hint(vs, &c, &rec)
			d := &rec.Decision
			if d.Class != tc.class {
				t.Fatalf("class %s (%s), want %s", d.Class, d.Reason, tc.class)
			}
			if !bytes.Equal(rec.Call, event) || rec.Key != tc.key || rec.Source != schema.SourceAPI || rec.Action != schema.ActionObserved ||
				rec.ResolverBuild != "test-build" || rec.PolicyVersion != "strict" {
				t.Fatalf("record %+v", rec)
			}
			if rec.DecidedAt.Location() != time.UTC || rec.DecidedAt.Before(before) || rec.DecidedAt.After(after) {
				t.Fatalf("decided_at %v, want now (%v..%v) in UTC", rec.DecidedAt, before, after)
			}
			if got := string(h.AppendJSON(nil)); got != tc.hints || rec.SuggestedTool != tc.tool {
				t.Fatalf("hints %s suggested_tool %q, want %s %q", got, rec.SuggestedTool, tc.hints, tc.tool)
			}

			answer := callpath.AppendAnswer(nil, &rec, &h)
			var got, want map[string]any
			if err := json.Unmarshal(answer, &got); err != nil {
				t.Fatalf("answer %s: %v", answer, err)
			}
			if err := json.Unmarshal(rec.AppendDecision(nil), &want); err != nil {
				t.Fatal(err)
			}
			want["source"], want["action"] = "api", "observed"
			var hv any
			if err := json.Unmarshal([]byte(tc.hints), &hv); err != nil {
				t.Fatal(err)
			}
			want["hints"] = hv
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("answer\n%s\nwant the decision with source, action and hints:\n%v", answer, want)
			}
		})
	}
}

// TestStepCopy: a copy of the step decides under its own mode and policy
// (the API's ?mode=), the original keeps its own.
func TestStepCopy(t *testing.T) {
	store, calls := sample(t)
	st := step(resolve.Strict)
	pinned := st
	pinned.Resolver.Mode, pinned.PolicyVersion = resolve.PinAssisted, resolve.PinAssisted.String()
	var dec schema.CallDecoder
	var c schema.Call
	var a, b audit.Record
	pinned.Decide(store.Snapshot(), &dec, calls["c-28dcd0"], &c, &a)
	st.Decide(store.Snapshot(), &dec, calls["c-28dcd0"], &c, &b)
	if a.Decision.Verdict == schema.Reject || a.PolicyVersion != "pin-assisted" || b.Decision.Class != schema.M2 || b.PolicyVersion != "strict" {
		t.Fatalf("pin-assisted %s %s, strict %s %s", a.Decision.Class, a.PolicyVersion, b.Decision.Class, b.PolicyVersion)
	}
}

// TestRecord: records acknowledged by the audit topic are there, as
// produced; a topic that does not take them fails Record with
// ErrUnrecorded (and the producer's error) within the producer's
// timeout; without a producer nothing is recorded and nothing fails.
func TestRecord(t *testing.T) {
	store, calls := sample(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, audit.DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k, err := audit.NewKafka(audit.KafkaConfig{Brokers: c.ListenAddrs(), Timeout: time.Second,
		Opts: []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	st := step(resolve.Strict)
	if err := st.Record(context.Background(), &audit.Record{}); err != nil {
		t.Fatalf("Record without a producer: %v", err)
	}
	st.Audit = k
	var dec schema.CallDecoder
	var call schema.Call
	var rec audit.Record
	st.Decide(store.Snapshot(), &dec, calls["c-f678ef"], &call, &rec)
	st.Hint(store.Snapshot(), &call, &rec)
	ctx := context.Background()
	if err := st.Record(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	got := kafkatest.Consume(t, c.ListenAddrs(), audit.DefaultTopic, 1, 10*time.Second)
	if len(got) != 1 || string(got[0].Key) != rec.Key {
		t.Fatalf("%d records in the topic, want 1 keyed %q", len(got), rec.Key)
	}
	var back audit.Record
	if err := audit.Decode(got[0].Value, &back); err != nil {
		t.Fatal(err)
	}
	want := rec
	want.Key = ""
	want.DecidedAt = want.DecidedAt.Truncate(time.Millisecond)
	if !reflect.DeepEqual(back, want) {
		t.Fatalf("recorded\n%+v\nwant\n%+v", back, want)
	}

	absent, err := audit.NewKafka(audit.KafkaConfig{Brokers: c.ListenAddrs(), Topic: "absent", Timeout: time.Second,
		Opts: []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer absent.Close()
	st.Audit = absent
	start := time.Now()
	err = st.Record(ctx, &rec)
	if !errors.Is(err, callpath.ErrUnrecorded) || !errors.Is(err, audit.ErrUnavailable) || !strings.Contains(err.Error(), "audit trail") {
		t.Fatalf("Record to a missing topic: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Record failed after %v", d)
	}
}
