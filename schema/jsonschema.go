package schema

import _ "embed"

// The JSON Schemas (draft 2020-12) of the three event types. They describe
// exactly what the decoders accept, except for the rules their
// descriptions name (repeated argument keys, repeated tool names).
var (
	//go:embed call.schema.json
	CallSchema []byte
	//go:embed listing.schema.json
	ListingSchema []byte
	//go:embed decision.schema.json
	DecisionSchema []byte
)
