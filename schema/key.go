package schema

// The Kafka record keys of the contract's events. Calls are keyed by
// session so that a session's calls stay in order on one partition;
// listings by registry and server so that a server's listings do.

// CallKey is the record key of a call event: its session_id, else its
// agent_id, else "" (no key).
func CallKey(sessionID, agentID string) string {
	if sessionID != "" {
		return sessionID
	}
	return agentID
}

// ListingKey is the record key of a listing event: registry "/" server.
func ListingKey(registry, server string) string { return registry + "/" + server }
