// Package audit owns the audit record: one decision taken in the call path
// (POST /v1/resolve, the MCP gateway), produced to Kafka before the caller
// is answered, and stored by `resolverd run` as a decision row through the
// same exactly-once writer as the stream's (the row's source is the
// record's; the call is not decided again).
//
// # The record
//
// One JSON object per Kafka record, topic DefaultTopic ("tool-audit"),
// keyed by the call's session (schema.CallKey):
//
//		{"type":"audit","source":"api","action":"enforced",
//		 "call":{...the call event as received...},
//		 "decision":{"event_id":"c-1","verdict":"reject","class":"H1",...,
//		   "suggested_tool":"create_issue","resolver_build":"...",
//		   "policy_version":"strict","decided_at":"2026-11-29T10:00:05.251Z"}}
//
//	  - source: "api", "gateway" or "model-proxy" (a record cannot claim "stream" or
//	    "reanalysis": those rows are the pipeline's own).
//	  - action: what the host reports it did with the verdict: "enforced",
//	    "observed", or "" (unknown).
//	  - call: the call event exactly as received when the strict parser
//	    (jsontape) takes it: valid JSON in valid UTF-8, no repeated member
//	    name, nesting within jsontape.MaxDepth, no surrounding whitespace;
//	    otherwise "call_base64", its bytes in standard base64,
//	    so that the row of a MALFORMED call is derived from the very bytes
//	    that were decided.
//	  - decision: the decision as answered (schema.Decision.AppendJSON's
//	    members), plus suggested_tool, resolver_build, policy_version and
//	    decided_at; its member names and types are those of the decision
//	    row's columns (schema.Columns). Hints are answered, never stored.
//
// Decoding is strict, as for every event from outside: the record is
// parsed by jsontape, so it must be valid JSON in valid UTF-8 with no
// member name repeated anywhere, the call's included (two readers must not
// see two records; a call that repeats one travels as call_base64); type
// must be "audit"; source, action, class and verdict must be known values
// and agree (the verdict is the class's); decided_at is required. Members
// not listed are ignored (forward compatibility).
//
// # Producing
//
// Producer is what a front end needs: Produce(ctx, records...) returns
// nil once the broker has acknowledged every record (acks=all), so the
// front end answers only decisions that are in Kafka and fails closed
// (HTTP 503) otherwise. Kafka implements it with franz-go.
package audit
