package analytics

import (
	"strings"

	"github.com/toolaudit/toolaudit/schema"
)

// The groups of classes the headline rates count. Rates are over the
// decisions that are not MALFORMED (a malformed event has no model or tool
// to blame).
var (
	// Hallucination: the model's own mistakes. It named no tool (H1, M1),
	// invented or forgot arguments (H2), sent wrong values (H3), called a
	// tool it was not shown (H4), or sent the arguments of another tool
	// (H5) or of the same name on another server (M5). Not: name
	// collisions and shadowing of the deployment (M2, M3), a host showing a
	// stale definition (M4), or an unusable event (MALFORMED).
	Hallucination = []schema.Class{schema.H1, schema.H2, schema.H3, schema.H4, schema.H5, schema.M1, schema.M5}
	// UnknownTool: the name resolves to no tool (H1, or M1 in an MCP
	// deployment).
	UnknownTool = []schema.Class{schema.H1, schema.M1}
	// SchemaReject: a real tool with arguments its schema rejects (H2, H3),
	// or that fit another tool or server instead (H5, M5).
	SchemaReject = []schema.Class{schema.H2, schema.H3, schema.H5, schema.M5}
	// Collision: the name is provided by several servers (M2: same trust,
	// no pin) or shadowed by a lower-trust one (M3).
	Collision = []schema.Class{schema.M2, schema.M3}
	// MCPClasses are the classes of multi-server deployments.
	MCPClasses = []schema.Class{schema.M1, schema.M2, schema.M3, schema.M4, schema.M5}
)

// sqlList is classes as a ClickHouse list of string literals: ('H1', 'M1').
func sqlList(classes []schema.Class) string {
	q := make([]string, len(classes))
	for i, c := range classes {
		q[i] = "'" + string(c) + "'"
	}
	return "(" + strings.Join(q, ", ") + ")"
}

// classOrder is schema.Classes as a ClickHouse array literal, for ORDER BY
// indexOf(...): classes in the order summaries print them.
func classOrder() string {
	cs := schema.Classes
	return "[" + strings.Trim(sqlList(cs[:]), "()") + "]"
}
