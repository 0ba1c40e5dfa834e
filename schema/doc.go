// Package schema holds the wire contract of toolaudit: the listing, call and
// decision events of spec v1, their strict decoders, the JSON Schemas that
// describe the same events (call.schema.json, listing.schema.json,
// decision.schema.json) and the decision encoder.
//
// Decoding never panics and never guesses: an event that cannot be used is
// reported as a *MalformedError whose Reason becomes the reason of a
// MALFORMED decision. The package knows nothing of Kafka or ClickHouse.
package schema
