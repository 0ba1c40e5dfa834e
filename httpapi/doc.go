// Package httpapi serves resolverd's HTTP endpoints: the synchronous
// resolve API that enforcement points (agent hosts, MCP gateways) call
// before executing a tool call, Prometheus metrics, and health probes.
//
//	POST /v1/resolve   one call event, or a JSON array of up to MaxBatch
//	                   of them; answer: the decision, or an array of
//	                   decisions in the same order (api/openapi.yaml)
//	GET  /metrics      Prometheus text format, from the daemon's own registry
//	GET  /healthz      200 while the process serves
//	GET  /readyz       200 while the daemon decides (Config.Ready), else 503 with the reason
//
// # Answers
//
// Every call that could be read gets a decision with status 200, a
// rejection included: a call event that is not valid JSON, not an object,
// or breaks the contract is a MALFORMED decision with its reason. Only a
// request that cannot be used at all gets a 4xx: a body that is neither a
// JSON object nor an array of them, an empty or malformed array, more than
// MaxBatch calls or MaxBody bytes (413), an unknown or bad query
// parameter. Errors are JSON, {"error": code, "message": text}, with
// stable codes (errors.go).
//
// A call is decided, recorded and answered by the call path's one step
// (package callpath, the gateway's too). An answer is the decision of the
// wire contract (schema.Decision's members) plus suggested_tool,
// resolver_build, policy_version and decided_at (the audit record holds
// the same object), then "source" ("api"), "action" and "hints" (package
// resolve/suggest; {} when there is none): callpath.AppendAnswer. ?mode=pin-assisted resolves
// that request's same-trust ties (policy_version, the resolver's policy
// stamp as every decider's, begins with the mode that decided); ?action=enforced|observed is what the caller reports it does
// with the verdict, recorded with it (one value for every call of the
// request; a caller that acts differently per call sends them apart).
// The Content-Type of the request is not checked.
//
// # The audit trail: fail closed
//
// With Config.Audit, every decision of a request is produced to the audit
// topic, and the request is answered only once the broker has
// acknowledged all of them (acks=all): resolverd run then stores each as
// a decision row with source api, exactly once, even if this process
// dies right after answering. When the records are not acknowledged (no
// broker, no topic, a timeout) the request is answered 503
// audit_unavailable with Retry-After and no verdict: an enforcement point
// never receives a verdict that leaves no trace. Hosts that must not
// block on it treat 503 as their own policy says (fail open or closed).
// Likewise, until Config.Decides reports the registry complete (resolverd
// run: the listings topic read to its end once), a request is answered
// 503 not_ready: no verdict from a partial registry.
//
// # Bounds
//
// Work in flight is bounded so that slow or hostile clients cannot hold
// the process's memory: at most MaxInFlight requests are answered at
// once, and their bodies reserve at most MaxInFlightBytes (a request
// reserves its Content-Length, or MaxBody when chunked, before reading);
// beyond either a request is answered 503 overloaded at once. Server
// (server.go) bounds connections (MaxConns, 503 beyond), the time to send
// the headers and the whole request (a trickling body is answered 408),
// idle keep-alive connections, and speaks TLS when given a certificate.
// Memory for request bodies is therefore at most MaxInFlightBytes plus
// the pooled buffers, whatever the clients do (TestBodyBytesInFlight).
//
// # Authentication
//
// With Config.Tokens (package bearer), /v1/* requires "Authorization:
// Bearer <token>": 401 unauthorized without a valid one (with a
// WWW-Authenticate challenge), 403 forbidden when the tokens file lists
// no token at all. /metrics, /healthz and /readyz stay open unless
// AuthProbes.
package httpapi
