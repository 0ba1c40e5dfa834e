package stream

import (
	"context"
	"fmt"
	"hash/maphash"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/ingest"
	"github.com/toolaudit/toolaudit/otlp"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// topicKind is what a consumed topic's records are.
type topicKind uint8

const (
	kindCalls     topicKind = iota // call events, decided
	kindAudit                      // audit records, stored as they are
	kindOTLPSpans                  // the Collector's trace batches, each decided into many rows
	kindOTLPLogs                   // the Collector's log batches
)

func (c *Config) kindOf(topic string) topicKind {
	switch {
	case topic == c.AuditTopic && c.AuditTopic != "":
		return kindAudit
	case topic == c.OTLPSpansTopic && c.OTLPSpansTopic != "":
		return kindOTLPSpans
	case topic == c.OTLPLogsTopic && c.OTLPLogsTopic != "":
		return kindOTLPLogs
	}
	return kindCalls
}

// overlay is the registry versions one OTLP record's calls resolve
// against: the tool sets the record itself carries (the definitions each
// model was given: package declared), and the store for every other
// registry.
type overlay struct {
	base  resolve.Versions
	regs  []string
	snaps []*registry.Snapshot
}

func (o *overlay) At(reg string, t time.Time) *registry.Version {
	for i, r := range o.regs {
		if r == reg {
			return o.snaps[i].At(reg, t)
		}
	}
	if o.base == nil {
		return nil
	}
	return o.base.At(reg, t)
}

// otlpState is a worker's scratch for OTLP records, reused record to
// record.
type otlpState struct {
	ov       overlay
	events   []ingest.Event
	calls    []otlp.Call
	listings []*kgo.Record
	models   recent // the tool calls decided lately, by trace and call id
}

// pairWindow is how many of the model's tool calls a partition's worker
// remembers to pair with their executions in later records (8 bytes and
// map overhead each: under 1 MiB).
const pairWindow = 1 << 15

// recent is a bounded map of keys' hashes to what was decided of the
// call, the oldest forgotten first.
type recent struct {
	seed maphash.Seed
	m    map[uint64]seen
	ring []uint64
	next int
}

// seen is what a partition decided of one tool call: its model record,
// or only an execution, under that execution's identity (otlp.Call.ID).
type seen struct {
	model bool
	exec  string
}

func (r *recent) hash(trace, call string) uint64 {
	if r.m == nil {
		r.seed, r.m, r.ring = maphash.MakeSeed(), make(map[uint64]seen, pairWindow), make([]uint64, pairWindow)
	}
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(trace)
	h.WriteByte(0)
	h.WriteString(call)
	return h.Sum64()
}

// see records c under k and says what to do with it: drop it (decided
// before: an execution after any record of its call, a model record after
// another model record), or decide it, under the identity of the
// execution decided before it when there was one (adopt: the model's
// decision then replaces the execution's in the store).
func (r *recent) see(k uint64, c *otlp.Call) (drop bool, adopt string) {
	was, ok := r.m[k]
	model := c.FromModel()
	switch {
	case ok && (was.model || !model):
		return true, ""
	case ok:
		r.m[k] = seen{model: true}
		return false, was.exec
	}
	if old := r.ring[r.next]; old != 0 {
		delete(r.m, old)
	}
	e := seen{model: model}
	if !model {
		e.exec = c.ID()
	}
	r.ring[r.next], r.m[k] = k, e
	r.next = (r.next + 1) % len(r.ring)
	return false, ""
}

// pair drops from calls those this partition decided in an earlier
// record: one call, one decision. The same tool call reaches several
// records when the SDK exports spans apart (the OpenTelemetry JS SDK's
// SimpleSpanProcessor exports every span alone): the Vercel AI SDK records
// a call on its chat span, again on the enclosing generateText span, and
// its execution on an execute_tool span, exported in that order but
// concurrently, so they may reach Kafka in any. The first model record is
// decided (the chat span carries the tool definitions too), and an
// execution after it is dropped: it never replaces the model's decision.
// An execution seen first is decided; the model's record after it is
// decided under the execution's identity, so that its row replaces the
// execution's. A call whose other records are elsewhere (another
// partition or topic, forgotten) is decided again: twice, never lost.
func (st *otlpState) pair(calls []otlp.Call) ([]otlp.Call, int) {
	out, dropped := st.calls[:0], 0
	for i := range calls {
		c := &calls[i]
		if c.TraceID == "" || c.CallID == "" || c.Malformed != "" {
			out = append(out, *c)
			continue
		}
		drop, adopt := st.models.see(st.models.hash(c.TraceID, c.CallID), c)
		if drop {
			dropped++
			continue
		}
		if adopt != "" {
			c.Identity = adopt
		}
		out = append(out, *c)
	}
	st.calls = out
	return out, dropped
}

// decideOTLP turns one record of an OpenTelemetry topic (a whole batch of
// the Collector's) into rows, all in the same hand-off, so that its offset
// is committed only behind every decision it yields. A record that is not
// OTLP, or over the limits, or whose items have no time, goes to the DLQ
// with the reason and yields no row; within a record, an item that cannot
// become a call is a MALFORMED row (package otlp), and one that is no tool
// call at all is counted (otlp_items_skipped_total). The MCP tools/list
// results it holds are produced to the listings topic first, and its
// calls decided once they are applied (mcpListings). It reports false
// when the worker was stopped before the record was decided: nothing of
// it is handed off.
func (w *worker) decideOTLP(r *kgo.Record) bool {
	cfg := &w.p.cfg
	h := &w.out
	sig := otlp.Traces
	if w.kind == kindOTLPLogs {
		sig = otlp.Logs
	}
	refuse := func(reason string) bool {
		w.p.m.otlpRefused.Inc()
		h.dlq = append(h.dlq, w.dlqRecord(r, reason))
		h.last = position{offset: r.Offset, epoch: r.LeaderEpoch}
		return true
	}
	res, err := otlp.Decode(r.Value, sig, cfg.OTLPEncoding, cfg.OTLPLimits)
	if err != nil {
		return refuse(err.Error())
	}
	w.p.m.otlpSkipped.Add(float64(res.Skipped))
	st := &w.otlp
	var paired int
	res.Calls, paired = st.pair(res.Calls)
	w.p.m.otlpPaired.Add(float64(paired))
	st.events, st.listings = st.events[:0], st.listings[:0]
	c := ingest.Context{
		Source:   r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "@" + strconv.FormatInt(r.Offset, 10),
		Line:     1,
		Defaults: ingest.Meta{Registry: cfg.OTLPRegistry},
	}
	listing := 0
	err = ingest.OTelEvents(res, c, func(ev ingest.Event) error {
		if ev.Kind == ingest.KindCall {
			st.events = append(st.events, ev)
			return nil
		}
		// The listing of res.Listings[listing]: an MCP server's goes to the
		// topic; the definitions a model was given are resolved below,
		// without it.
		if l := res.Listings[listing]; l.From == otlp.FromMCPList && !cfg.Passthrough {
			st.listings = append(st.listings, &kgo.Record{Topic: cfg.ListingsTopic, Key: ev.Key, Value: ev.Value})
		}
		listing++
		return nil
	})
	if err != nil {
		return refuse(fmt.Sprintf("otlp: %v", err))
	}
	if len(st.listings) > 0 && !w.mcpListings(r, st.listings) {
		return false
	}
	st.ov.regs, st.ov.snaps = st.ov.regs[:0], st.ov.snaps[:0]
	if !cfg.Passthrough {
		st.ov.base = w.p.store.Snapshot()
	}
	for _, l := range res.Listings {
		if l.From == otlp.FromMCPList {
			continue
		}
		reg := otlp.DefinitionsRegistry(cfg.OTLPRegistry, l.Digest)
		set, err := w.p.declared.Get(reg, l.Tools)
		if err != nil {
			// Calls to this registry then find no version: H1, never an allow.
			w.p.log.Warn("tool definitions in a trace are not a usable listing; their calls are rejected",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "registry", reg, "err", err)
			continue
		}
		st.ov.regs, st.ov.snaps = append(st.ov.regs, reg), append(st.ov.snaps, set.Snap)
	}
	var vs resolve.Versions // nil in passthrough: decoded, stored undecided
	if !cfg.Passthrough {
		vs = &st.ov
	}
	for _, ev := range st.events {
		h.rows = append(h.rows, schema.Row{})
		row := &h.rows[len(h.rows)-1]
		row.AnalysisID, row.ResolverBuild, row.PolicyVersion = cfg.AnalysisID, cfg.ResolverBuild, w.p.policy
		row.Source = schema.SourceStream
		row.Topic, row.Partition, row.Offset = r.Topic, r.Partition, r.Offset
		w.rd.DecideRow(vs, ev.Value, r.Timestamp, row)
		w.count(row)
	}
	h.last = position{offset: r.Offset, epoch: r.LeaderEpoch}
	w.p.m.otlpRecords.Inc()
	return true
}

// mcpListings produces the MCP tools/list results of record r to the
// listings topic, where every instance applies them in event time as the
// gateway's or ingest's, and waits until this instance has applied them
// (the listings watermark has passed their acknowledgement), so that the
// record's calls to those servers resolve against them. A listing read
// again (the record delivered twice) is the same event, which the
// registry counts as a duplicate. Producing is retried until it succeeds:
// the partition waits, nothing is decided without them. It reports false
// when the worker was stopped first.
func (w *worker) mcpListings(r *kgo.Record, recs []*kgo.Record) bool {
	err := w.p.wr.retry(w.ctx, "MCP listings produce", func() int { return len(recs) }, func(ctx context.Context) error {
		return w.cl.ProduceSync(ctx, recs...).FirstErr()
	}, nil)
	if err != nil {
		return false
	}
	acked := w.p.wm.mono(time.Now())
	w.p.m.otlpListings.Add(float64(len(recs)))
	for {
		asOf, ch := w.p.wm.state()
		if asOf >= acked {
			return true
		}
		select {
		case <-ch:
		case <-w.ctx.Done():
			return false
		}
	}
}
