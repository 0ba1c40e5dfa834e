// Package apierror is the error envelope of the /v1 endpoints,
// {"error": code, "message": text} (api/openapi.yaml's Error), written the
// same way by every handler that answers under /v1: the resolve API
// (httpapi) and POST /v1/approvals (approvals/approvalsapi). Codes are
// stable (clients branch on them); messages are for people. Every 503
// carries Retry-After, so that a client backs off alike whichever
// endpoint refused it.
package apierror

import (
	"net/http"
	"strconv"

	"github.com/toolaudit/toolaudit/schema"
)

// RetryAfterSeconds is the Retry-After of every 503.
const RetryAfterSeconds = 1

// Write answers status with the envelope of code and message, not to be
// cached; a 503 carries Retry-After.
func Write(w http.ResponseWriter, status int, code, message string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", strconv.Itoa(RetryAfterSeconds))
	}
	w.WriteHeader(status)
	w.Write(Append(make([]byte, 0, 64+len(message)), code, message))
}

// Append appends the envelope of code and message to b, a line of JSON:
// the body Write answers (and what an answer written by hand, before
// net/http, sends).
func Append(b []byte, code, message string) []byte {
	b = append(b, `{"error":`...)
	b = schema.AppendString(b, code)
	b = append(b, `,"message":`...)
	b = schema.AppendString(b, message)
	return append(b, "}\n"...)
}
