package sink

import (
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// colDef is one column of table decisions: its name, its type as
// system.columns shows it, and the schema.Row field it stores (exactly one
// accessor is set).
type colDef struct {
	name, chType string
	str          func(*schema.Row) *string
	boolean      func(*schema.Row) *bool
	tm           func(*schema.Row) *time.Time
	i32          func(*schema.Row) *int32
	i64          func(*schema.Row) *int64
	zeroIsNow    bool // a zero time is stored as the time of the Write
}

const (
	tString = "String"
	tLC     = "LowCardinality(String)"
	tBool   = "Bool"
	tTime   = "DateTime64(3, 'UTC')"
)

func strCol(name, typ string, f func(*schema.Row) *string) colDef {
	return colDef{name: name, chType: typ, str: f}
}

func boolCol(name string, f func(*schema.Row) *bool) colDef {
	return colDef{name: name, chType: tBool, boolean: f}
}

func timeCol(name string, f func(*schema.Row) *time.Time) colDef {
	return colDef{name: name, chType: tTime, tm: f}
}

// columns are every field of schema.Row, in the order of the DDL
// (schema/ddl/0001_decisions.sql). TestSchemaMatchesRow checks both ways.
var columns = []colDef{
	strCol("event_id", tString, func(r *schema.Row) *string { return &r.EventID }),
	strCol("verdict", tLC, func(r *schema.Row) *string { return (*string)(&r.Verdict) }),
	strCol("class", tLC, func(r *schema.Row) *string { return (*string)(&r.Class) }),
	strCol("reason", tString, func(r *schema.Row) *string { return &r.Reason }),
	strCol("path", tString, func(r *schema.Row) *string { return &r.Path }),
	boolCol("coercible", func(r *schema.Row) *bool { return &r.Coercible }),
	strCol("resolved_server", tLC, func(r *schema.Row) *string { return &r.ResolvedServer }),
	strCol("resolved_tool", tLC, func(r *schema.Row) *string { return &r.ResolvedTool }),
	strCol("registry_version", tLC, func(r *schema.Row) *string { return &r.RegistryVersion }),
	boolCol("drift", func(r *schema.Row) *bool { return &r.Drift }),
	strCol("seen_digest", tLC, func(r *schema.Row) *string { return &r.SeenDigest }),
	strCol("current_digest", tLC, func(r *schema.Row) *string { return &r.CurrentDigest }),

	strCol("call_key", tString, func(r *schema.Row) *string { return &r.CallKey }),
	strCol("analysis_id", tLC, func(r *schema.Row) *string { return &r.AnalysisID }),
	strCol("resolver_build", tLC, func(r *schema.Row) *string { return &r.ResolverBuild }),
	strCol("policy_version", tLC, func(r *schema.Row) *string { return &r.PolicyVersion }),

	strCol("registry", tLC, func(r *schema.Row) *string { return &r.Registry }),
	strCol("agent_id", tLC, func(r *schema.Row) *string { return &r.AgentID }),
	strCol("session_id", tString, func(r *schema.Row) *string { return &r.SessionID }),
	strCol("model", tLC, func(r *schema.Row) *string { return &r.Model }),
	strCol("provider", tLC, func(r *schema.Row) *string { return &r.Provider }),
	strCol("surface", tLC, func(r *schema.Row) *string { return &r.Surface }),
	strCol("tool", tLC, func(r *schema.Row) *string { return &r.Tool }),
	strCol("server", tLC, func(r *schema.Row) *string { return &r.Server }),
	timeCol("emitted_at", func(r *schema.Row) *time.Time { return &r.EmittedAt }),
	{name: "decided_at", chType: tTime, tm: func(r *schema.Row) *time.Time { return &r.DecidedAt }, zeroIsNow: true},

	strCol("args_shape", tString, func(r *schema.Row) *string { return &r.ArgsShape }),
	strCol("args_hash", tString, func(r *schema.Row) *string { return &r.ArgsHash }),
	strCol("args_raw", tString, func(r *schema.Row) *string { return &r.ArgsRaw }),

	strCol("topic", tLC, func(r *schema.Row) *string { return &r.Topic }),
	{name: "partition", chType: "Int32", i32: func(r *schema.Row) *int32 { return &r.Partition }},
	{name: "offset", chType: "Int64", i64: func(r *schema.Row) *int64 { return &r.Offset }},
}

// columnList is "event_id, verdict, ..." for INSERT and SELECT.
func columnList() string {
	b := make([]byte, 0, 512)
	for i, c := range columns {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '`')
		b = append(b, c.name...)
		b = append(b, '`')
	}
	return string(b)
}

// The store's time range: DateTime64's 1900..2299 cut at the end of Go's
// int64 nanoseconds (2262-04-11), which the client converts through.
var (
	epoch   = time.Unix(0, 0).UTC()
	minTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2262, 4, 10, 23, 59, 59, 999e6, time.UTC)
)

// storeTime is t as stored: the zero time (no usable time) as the Unix
// epoch, milliseconds, clamped into the store's range (clamped reports it).
func storeTime(t time.Time) (_ time.Time, clamped bool) {
	switch {
	case t.IsZero():
		return epoch, false
	case t.Before(minTime):
		return minTime, true
	case t.After(maxTime):
		return maxTime, true
	}
	return t.Truncate(time.Millisecond).UTC(), false
}

// loadTime is the inverse of storeTime: the epoch means "no time".
func loadTime(t time.Time) time.Time {
	if t.Equal(epoch) {
		return time.Time{}
	}
	return t.UTC()
}
