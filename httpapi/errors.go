package httpapi

// Error codes of the API's JSON errors (package apierror): {"error": code,
// "message": text}. They are stable (clients branch on them); messages are
// for people.
const (
	codeBadRequest   = "bad_request"        // 400: the request cannot be used
	codeUnauthorized = "unauthorized"       // 401: no or an invalid bearer token
	codeForbidden    = "forbidden"          // 403: no token is accepted
	codeNotFound     = "not_found"          // 404
	codeMethod       = "method_not_allowed" // 405
	codeTimeout      = "request_timeout"    // 408: the body did not arrive in time
	codeTooLarge     = "payload_too_large"  // 413: body or batch over its limit
	codeOverloaded   = "overloaded"         // 503: too many requests or body bytes in flight
	codeAuditDown    = "audit_unavailable"  // 503: the audit trail did not take the decisions
	codeNotReady     = "not_ready"          // 503: the registry is not complete yet (Config.Decides)
	contentTypeJSON  = "application/json"
)
