// Package schema holds the wire contract of toolaudit and the store's
// schema: the listing, call and decision events of spec v1, their strict
// decoders, the JSON Schemas that describe the same events
// (call.schema.json, listing.schema.json, decision.schema.json), the
// decision encoder, the tool digest (Digest); and the decision row as stored (Row), the table of its
// fields and column types (Columns) and the ClickHouse DDL that creates
// them (Migrations, ddl/*.sql).
//
// Decoding never panics and never guesses: an event that cannot be used is
// reported as a *MalformedError whose Reason becomes the reason of a
// MALFORMED decision. Every event is parsed once, strictly, by package
// jsontape: one reading per event (a member name repeated anywhere is
// MALFORMED, with its JSON pointer), valid UTF-8, at most
// jsontape.MaxDepth levels, and times within [MinTime, EndTime) (wire
// contract rules 9 and 10); cost linear in the event.
//
// The package uses no Kafka or ClickHouse client: it states what the
// other packages send and store.
package schema
