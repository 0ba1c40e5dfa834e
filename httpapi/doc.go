// Package httpapi serves resolverd's HTTP endpoints: the synchronous
// resolve API that enforcement points (agent hosts, MCP gateways) call
// before executing a tool call, Prometheus metrics, and health probes.
//
//	POST /v1/resolve   body: one call event (wire contract v1); answer: its decision
//	GET  /metrics      Prometheus text format, from the daemon's own registry
//	GET  /healthz      200 while the process serves
//	GET  /readyz       200 while the daemon decides (Config.Ready), else 503 with the reason
package httpapi
