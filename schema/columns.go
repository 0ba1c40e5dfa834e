package schema

import (
	"slices"
	"time"
)

// ColumnType is the type of a column of table decisions, spelled as
// ClickHouse's system.columns shows it.
type ColumnType string

// The column types of table decisions.
const (
	TypeString         ColumnType = "String"
	TypeLowCardinality ColumnType = "LowCardinality(String)"
	TypeBool           ColumnType = "Bool"
	TypeTime           ColumnType = "DateTime64(3, 'UTC')"
	TypeInt32          ColumnType = "Int32"
	TypeInt64          ColumnType = "Int64"
)

// Column is one field of Row and the column of table decisions that
// stores it: the name, the column's type, and the field, through exactly
// one accessor, the one of the field's Go type (Str for string fields and
// the string types Verdict and Class).
type Column struct {
	Name  string
	Type  ColumnType
	Str   func(*Row) *string
	Bool  func(*Row) *bool
	Time  func(*Row) *time.Time
	Int32 func(*Row) *int32
	Int64 func(*Row) *int64
	// ZeroIsWriteTime: a zero time is stored as the time of the write
	// (decided_at of a row that was not stamped).
	ZeroIsWriteTime bool
}

// Columns returns the table of Row's fields, in the order of the columns
// of table decisions (ddl/0001_decisions.sql, types as of the latest
// migration). It is the one list of the decision row's fields: the sink's
// INSERT, its reads and its check of the table at start all derive from
// it, and TestColumns checks that it names every field of Row once.
func Columns() []Column { return slices.Clone(columns) }

func str(name string, typ ColumnType, f func(*Row) *string) Column {
	return Column{Name: name, Type: typ, Str: f}
}

func boolean(name string, f func(*Row) *bool) Column {
	return Column{Name: name, Type: TypeBool, Bool: f}
}

var columns = []Column{
	// the decision (spec v1, "Decision")
	str("event_id", TypeString, func(r *Row) *string { return &r.EventID }),
	str("verdict", TypeLowCardinality, func(r *Row) *string { return (*string)(&r.Verdict) }),
	str("class", TypeLowCardinality, func(r *Row) *string { return (*string)(&r.Class) }),
	str("reason", TypeString, func(r *Row) *string { return &r.Reason }),
	str("path", TypeString, func(r *Row) *string { return &r.Path }),
	boolean("coercible", func(r *Row) *bool { return &r.Coercible }),
	str("resolved_server", TypeLowCardinality, func(r *Row) *string { return &r.ResolvedServer }),
	str("resolved_tool", TypeLowCardinality, func(r *Row) *string { return &r.ResolvedTool }),
	str("registry_version", TypeLowCardinality, func(r *Row) *string { return &r.RegistryVersion }),
	boolean("drift", func(r *Row) *bool { return &r.Drift }),
	str("seen_digest", TypeLowCardinality, func(r *Row) *string { return &r.SeenDigest }),
	str("current_digest", TypeLowCardinality, func(r *Row) *string { return &r.CurrentDigest }),
	str("approval", TypeLowCardinality, func(r *Row) *string { return (*string)(&r.Approval) }),
	str("baseline_version", TypeLowCardinality, func(r *Row) *string { return &r.BaselineVersion }),

	// identity and the versions that produced the decision
	str("call_key", TypeString, func(r *Row) *string { return &r.CallKey }),
	str("analysis_id", TypeLowCardinality, func(r *Row) *string { return &r.AnalysisID }),
	str("resolver_build", TypeLowCardinality, func(r *Row) *string { return &r.ResolverBuild }),
	str("policy_version", TypeLowCardinality, func(r *Row) *string { return &r.PolicyVersion }),
	str("source", TypeLowCardinality, func(r *Row) *string { return (*string)(&r.Source) }),
	str("action", TypeLowCardinality, func(r *Row) *string { return (*string)(&r.Action) }),
	str("suggested_tool", TypeLowCardinality, func(r *Row) *string { return &r.SuggestedTool }),

	// the call's context
	str("registry", TypeLowCardinality, func(r *Row) *string { return &r.Registry }),
	str("agent_id", TypeLowCardinality, func(r *Row) *string { return &r.AgentID }),
	str("session_id", TypeString, func(r *Row) *string { return &r.SessionID }),
	str("model", TypeLowCardinality, func(r *Row) *string { return &r.Model }),
	str("provider", TypeLowCardinality, func(r *Row) *string { return &r.Provider }),
	str("surface", TypeLowCardinality, func(r *Row) *string { return &r.Surface }),
	str("tool", TypeLowCardinality, func(r *Row) *string { return &r.Tool }),
	str("server", TypeLowCardinality, func(r *Row) *string { return &r.Server }),
	{Name: "emitted_at", Type: TypeTime, Time: func(r *Row) *time.Time { return &r.EmittedAt }},
	{Name: "decided_at", Type: TypeTime, Time: func(r *Row) *time.Time { return &r.DecidedAt }, ZeroIsWriteTime: true},

	// the arguments' summary (raw only when configured)
	str("args_shape", TypeString, func(r *Row) *string { return &r.ArgsShape }),
	str("args_hash", TypeString, func(r *Row) *string { return &r.ArgsHash }),
	str("args_raw", TypeString, func(r *Row) *string { return &r.ArgsRaw }),

	// the Kafka record the call came from
	str("topic", TypeLowCardinality, func(r *Row) *string { return &r.Topic }),
	{Name: "partition", Type: TypeInt32, Int32: func(r *Row) *int32 { return &r.Partition }},
	{Name: "offset", Type: TypeInt64, Int64: func(r *Row) *int64 { return &r.Offset }},

	// the OpenTelemetry trace the call was recorded in
	str("trace_id", TypeString, func(r *Row) *string { return &r.TraceID }),
	str("span_id", TypeString, func(r *Row) *string { return &r.SpanID }),
}
