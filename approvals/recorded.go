package approvals

// Recorded is an approval event as the history keeps it (table
// approval_events): the event and the baseline version it makes (its
// offset in the approvals topic + 1).
type Recorded struct {
	Event
	Version int64
}
