package resolve_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/internal/testkit/oracle"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// benchCorpus is every corpus call that resolves to a tool (the calls a
// schema validator alone could check), decoded once, with its resolved
// tool's schema compiled by the baseline validator.
type benchCorpus struct {
	snap     *registry.Snapshot
	lines    [][]byte
	calls    []*schema.Call
	baseline []*jsonschema.Schema
	instance []any // arguments decoded for the baseline
	ours     []*signature.Signature
	// byName finds the baseline schema by registry and requested name, as a
	// validator-only gate must before it can validate.
	byName map[string]map[string]*jsonschema.Schema
}

func loadBench(b *testing.B) *benchCorpus {
	b.Helper()
	dir := filepath.Join("..", "testdata", "corpus")
	store := registry.New()
	for _, part := range []string{"sample", "bfcl"} {
		f, err := os.Open(filepath.Join(dir, part, "listings.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := check.LoadListings(f, store, nil); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	bc := &benchCorpus{snap: store.Snapshot(), byName: map[string]map[string]*jsonschema.Schema{}}
	compiled := map[string]*jsonschema.Schema{}
	var r resolve.Resolver
	for _, part := range []string{"sample", "bfcl"} {
		f, err := os.Open(filepath.Join(dir, part, "calls.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			line := bytes.Clone(sc.Bytes())
			var dec schema.CallDecoder // one per call: each keeps its arguments
			c := new(schema.Call)
			if dec.Decode(line, c) != nil {
				continue
			}
			var d schema.Decision
			r.Resolve(bc.snap, c, &d)
			if d.ResolvedTool == "" {
				continue
			}
			t := bc.snap.At(c.Registry, c.EmittedAt).Server(d.ResolvedServer).Tool(d.ResolvedTool)
			base, ok := compiled[t.Digest]
			if !ok {
				raw := rawSchema(b, filepath.Join(dir, part, "listings.jsonl"), t.Digest)
				if base, err = oracle.Compile(raw); err != nil {
					b.Fatal(err)
				}
				compiled[t.Digest] = base
			}
			inst := oracle.Instance(c.Arguments)
			// Identical verdicts: the baseline and our checker agree on
			// every call of the corpus.
			if (base.Validate(inst) == nil) != t.Sig.Accepts(c.Arguments) {
				b.Fatalf("%s: baseline and signature disagree", c.EventID)
			}
			bc.lines = append(bc.lines, line)
			bc.calls = append(bc.calls, c)
			bc.baseline = append(bc.baseline, base)
			bc.instance = append(bc.instance, inst)
			bc.ours = append(bc.ours, t.Sig)
			if bc.byName[c.Registry] == nil {
				bc.byName[c.Registry] = map[string]*jsonschema.Schema{}
			}
			bc.byName[c.Registry][c.Tool] = base
		}
		f.Close()
	}
	return bc
}

var schemaIndex = map[string][]byte{}

// rawSchema finds the inputSchema of the tool with that digest.
func rawSchema(b *testing.B, file, digest string) []byte {
	if s, ok := schemaIndex[digest]; ok {
		return s
	}
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		l, err := schema.DecodeListing(sc.Bytes())
		if err != nil {
			continue
		}
		for _, t := range l.Tools {
			d, err := schema.Digest(t.Name, t.InputSchema)
			if err != nil {
				b.Fatal(err)
			}
			schemaIndex[d] = t.InputSchema
		}
	}
	if s, ok := schemaIndex[digest]; ok {
		return s
	}
	b.Fatalf("no schema with digest %s", digest)
	return nil
}

// BenchmarkResolve: full resolution (version lookup, names, digest, drift,
// arguments, frontier) per call, warm cache. One op is one call.
func BenchmarkResolve(b *testing.B) {
	bc := loadBench(b)
	var r resolve.Resolver
	var d schema.Decision
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r.Resolve(bc.snap, bc.calls[i%len(bc.calls)], &d)
	}
}

// BenchmarkSignatureCheck: our argument checker alone on the same calls.
func BenchmarkSignatureCheck(b *testing.B) {
	bc := loadBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(bc.calls)
		bc.ours[j].Check(bc.calls[j].Arguments)
	}
}

// BenchmarkJSONSchemaBaseline: the same calls validated by
// santhosh-tekuri/jsonschema/v6 alone, schemas compiled once, arguments
// decoded once: it does less than BenchmarkResolve (no resolution).
func BenchmarkJSONSchemaBaseline(b *testing.B) {
	bc := loadBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(bc.calls)
		_ = bc.baseline[j].Validate(bc.instance[j])
	}
}

// BenchmarkJSONSchemaBaselineLookup: the baseline finding each call's
// schema by registry and name first, as a validator-only gate must.
func BenchmarkJSONSchemaBaselineLookup(b *testing.B) {
	bc := loadBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(bc.calls)
		_ = bc.byName[bc.calls[j].Registry][bc.calls[j].Tool].Validate(bc.instance[j])
	}
}

// BenchmarkDecodeResolve: from the raw call line to a decision.
func BenchmarkDecodeResolve(b *testing.B) {
	bc := loadBench(b)
	var r resolve.Resolver
	var dec schema.CallDecoder
	var c schema.Call
	var d schema.Decision
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := dec.Decode(bc.lines[i%len(bc.lines)], &c); err != nil {
			b.Fatal(err)
		}
		r.Resolve(bc.snap, &c, &d)
	}
}

// BenchmarkDecodeJSONSchemaBaseline: from the raw arguments to a verdict
// with the baseline (decode with its own decoder, then validate).
func BenchmarkDecodeJSONSchemaBaseline(b *testing.B) {
	bc := loadBench(b)
	args := make([][]byte, len(bc.calls))
	for i, c := range bc.calls {
		args[i] = c.Arguments.Raw()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(bc.calls)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args[j]))
		if err != nil {
			b.Fatal(err)
		}
		_ = bc.baseline[j].Validate(inst)
	}
}

// BenchmarkDecideRow: a worker's step from the raw call record to its
// stored row (RowDecider.DecideRow: decode, resolve, the arguments' shape
// and hash, the row's key) over every corpus call, sample then BFCL, in
// order, as the pipeline's bench backlog cycles them. One op is one call.
func BenchmarkDecideRow(b *testing.B) {
	bc := loadBench(b)
	var lines [][]byte
	for _, part := range []string{"sample", "bfcl"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", part, "calls.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		for l := range bytes.Lines(data) {
			lines = append(lines, bytes.TrimSuffix(l, []byte("\n")))
		}
	}
	var rd resolve.RowDecider
	var row schema.Row
	rec := time.Unix(1764547200, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		row = schema.Row{Topic: "calls", Offset: int64(i)}
		rd.DecideRow(bc.snap, lines[i%len(lines)], rec, &row)
	}
}
