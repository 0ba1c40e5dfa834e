package resolve

import (
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// TestBorrowed: the evidence of a borrowed shape (contract v1.2, rule 6)
// is an undeclared key where rule 3 closes an object, whatever failure
// the checker reports first; a missing key or a wrong value alone is not.
func TestBorrowed(t *testing.T) {
	const nested = `{"type":"object","properties":{"opts":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},"x":{"type":"string"}}}`
	for _, tc := range []struct {
		name, schema, args string
		want               bool
		path               string // of the borrowed key, when found
	}{
		{"undeclared top level", nested, `{"x":"s","zz":1}`, true, "/zz"},
		{"undeclared nested", nested, `{"opts":{"a":"s","b":1}}`, true, "/opts/b"},
		{"undeclared after a wrong value", nested, `{"x":1,"zz":1}`, true, "/zz"},
		{"undeclared behind a nested missing key", nested, `{"opts":{},"z/~z":1}`, true, "/z~1~0z"},
		{"undeclared nested behind a nested missing key", `{"type":"object","properties":{"a":{"type":"object","properties":{"x":{}},"required":["x"]},"b":{"type":"object","properties":{"y":{}}}}}`, `{"a":{},"b":{"zz":1}}`, true, "/b/zz"},
		{"missing nested key only", nested, `{"opts":{}}`, false, ""},
		{"wrong value only", nested, `{"x":1}`, false, ""},
		{"wrong nested value only", nested, `{"opts":{"a":1}}`, false, ""},
		{"missing top-level key only", `{"type":"object","properties":{"p":{"type":"string"}},"required":["p"]}`, `{}`, false, ""},
		{"extra key of an open object", `{"type":"object","properties":{"p":{"type":"string"}},"required":["p"],"additionalProperties":true}`, `{"q":1}`, false, ""},
		{"extra key under a schema for others", `{"type":"object","properties":{"p":{"type":"string"}},"additionalProperties":{"type":"string"}}`, `{"q":1}`, false, ""},
		{"key in a free-form object", `{"type":"object","properties":{"meta":{"type":"object"}},"required":["p"]}`, `{"meta":{"any":1}}`, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig, err := signature.Compile([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			var p jsontape.Tape
			if err := p.Parse([]byte(tc.args)); err != nil {
				t.Fatal(err)
			}
			res := sig.Check(p.Root())
			if res.Kind == signature.Pass {
				t.Fatalf("%s passes: the case tests nothing", tc.args)
			}
			if path, got := borrowed(res); got != tc.want || path != tc.path {
				t.Errorf("borrowed = %v at %q, want %v at %q (first failure %q at %s)", got, path, tc.want, tc.path, res.Reason, res.Path)
			}
		})
	}
}

// TestH5NeedsBorrowedKey: under contract v1.2 a call is H5 only when its
// arguments carry a key the named tool does not declare and another tool
// accepts them whole; a call that only misses a required key or has a
// wrong value is H2 or H3 even where another tool accepts it (the v1.1
// rule made each of these H5).
func TestH5NeedsBorrowedKey(t *testing.T) {
	s := registry.New()
	s.Apply(
		snap("fs", 0, "r", "fs", 1,
			tl("write_file", `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}`),
			tl("create_directory", `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`),
			tl("configure", `{"type":"object","properties":{"opts":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},"x":{"type":"string"}}}`),
			tl("configure_any", `{"type":"object","properties":{"opts":{"type":"object"},"zz":{"type":"integer"}}}`),
			tl("patch", `{"type":"object","properties":{"target":{"type":"string"}},"required":["target"],"additionalProperties":true}`)),
		snap("geo", 0, "r", "geo", 1,
			tl("list_regions", `{"type":"object","properties":{"region":{"enum":["eu","us"]}},"required":["region"]}`),
			tl("variant_searcher", `{"type":"object","properties":{"region":{"type":"string"},"gene":{"type":"string"}}}`)),
	)
	for _, tc := range []struct {
		name, tool, args string
		class            schema.Class
		path, reason     string
	}{
		{"forgot content", "write_file", `{"path":"a"}`, schema.H2, "/content", "required argument missing"},
		{"wrong enum value", "list_regions", `{"region":"na"}`, schema.H3, "/region", "enum"},
		{"wrong type", "create_directory", `{"path":1}`, schema.H3, "/path", "wrong type"},
		{"borrowed key", "create_directory", `{"path":"a","content":"c"}`, schema.H5, "/content", `"fs/write_file"`},
		{"borrowed key with a wrong value", "list_regions", `{"region":"na","gene":"brca1"}`, schema.H5, "/gene", `"geo/variant_searcher"`},
		{"borrowed key behind a nested missing key", "configure", `{"opts":{},"zz":1}`, schema.H5, "/zz", `"fs/configure_any"`},
		{"borrowed key nobody accepts", "create_directory", `{"path":"a","mode":"0777"}`, schema.H2, "/mode", "undeclared"},
		{"extra key of an open tool", "patch", `{"path":"a"}`, schema.H2, "/target", "required argument missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d schema.Decision
			(&Resolver{}).Resolve(s.Snapshot(), call{reg: "r", tool: tc.tool, args: tc.args, sec: 1}.build(t), &d)
			if d.Class != tc.class || d.Path != tc.path || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("%s %s %q, want %s %s containing %q", d.Class, d.Path, d.Reason, tc.class, tc.path, tc.reason)
			}
		})
	}
}

// TestTieBreak: in pin-assisted mode an unpinned name that several
// top-trust servers provide goes to the one whose digest is seen_digest,
// else to the first by server name whose signature accepts the arguments,
// else to the first by server name (contract v1.2); a lower-trust
// provider still makes it M3.
func TestTieBreak(t *testing.T) {
	mk := func(key string) schema.Tool {
		return tl("put", `{"type":"object","properties":{"`+key+`":{"type":"string"},"common":{"type":"string"}},"required":["`+key+`"]}`)
	}
	s := registry.New()
	s.Apply(
		snap("a", 0, "r", "alpha", 2, mk("a")),
		snap("b", 0, "r", "bravo", 2, mk("b")),
		snap("c", 0, "r", "charlie", 2, tl("put", `{"type":"object","properties":{"b":{"type":"string"},"c":{"type":"string"},"common":{"type":"string"}},"required":["c"]}`)),
		snap("d", 0, "r", "delta", 2, tl("put", `{"type":"object","properties":{"common":{"type":"string"}},"additionalProperties":true}`)),
		snap("s1", 0, "shadowed", "alpha", 2, mk("a")),
		snap("s2", 0, "shadowed", "bravo", 2, mk("b")),
		snap("s3", 0, "shadowed", "mirror", 1, mk("c")),
	)
	dg := func(server string) string { return digestOf(t, s, "r", server, "put", 1) }
	for _, tc := range []struct {
		name, reg, args, seen string
		class                 schema.Class
		server                string
	}{
		// delta is open: it accepts whatever has no wrong "common".
		{"first and last accept", "r", `{"a":"x"}`, "", schema.OK, "alpha"},
		{"second and last accept", "r", `{"b":"x"}`, "", schema.OK, "bravo"},
		{"third and last accept", "r", `{"b":"x","c":"y"}`, "", schema.OK, "charlie"},
		{"only the last accepts", "r", `{"zzz":"x"}`, "", schema.OK, "delta"},
		{"none accepts: first by name", "r", `{"a":"x","common":1}`, "", schema.H3, "alpha"},
		{"none accepts, missing key", "r", `{"common":1}`, "", schema.H2, "alpha"},
		{"seen_digest beats an accepting provider", "r", `{"a":"x"}`, dg("charlie"), schema.M5, "charlie"},
		{"seen_digest of an accepting provider", "r", `{"c":"x"}`, dg("charlie"), schema.OK, "charlie"},
		{"seen_digest of none", "r", `{"b":"x"}`, "sha256:00", schema.M4, "bravo"},
		{"shadowed stays M3", "shadowed", `{"b":"x"}`, "", schema.M3, "bravo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d schema.Decision
			(&Resolver{Mode: PinAssisted}).Resolve(s.Snapshot(), call{reg: tc.reg, tool: "put", args: tc.args, seen: tc.seen, sec: 1}.build(t), &d)
			if d.Class != tc.class || d.ResolvedServer != tc.server {
				t.Errorf("%s on %q (%s), want %s on %q", d.Class, d.ResolvedServer, d.Reason, tc.class, tc.server)
			}
		})
	}
}
