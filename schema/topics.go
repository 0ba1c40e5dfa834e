package schema

// The topics' default names, one home for each (the wire contract names
// the first two). A command's flag may name another; code that needs the
// default says it with these, never with a literal.
const (
	// TopicCalls holds call events, keyed by session (CallKey).
	TopicCalls = "tool-calls"
	// TopicListings holds listing events, keyed registry/server; read
	// whole by every instance, never compacted.
	TopicListings = "tool-listings"
	// TopicCallsDLQ receives the calls topic's records that became
	// MALFORMED, unchanged.
	TopicCallsDLQ = "tool-calls-dlq"
	// TopicAudit holds the call path's decisions (package audit).
	TopicAudit = "tool-audit"
	// TopicApprovals holds approval events: one partition, compacted
	// (package approvals/topic).
	TopicApprovals = "tool-approvals"
	// TopicDecisions is the suggested name of the decisions topic, off
	// unless configured (package decisions).
	TopicDecisions = "tool-decisions"
)
