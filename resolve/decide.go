package resolve

import "github.com/toolaudit/toolaudit/schema"

// Decide is the step every front end takes for one call event (the
// pipeline's workers, `resolverd check`, POST /v1/resolve): decode event
// with dec into c, then resolve c against vs into d; an event that cannot
// be decoded gets a MALFORMED decision with the decoder's reason, and c
// keeps what was read before the failure. It reports whether the event
// decoded. c borrows from dec as CallDecoder.Decode says.
//
// A nil vs only decodes: d then holds the event id and no class, the
// pipeline's passthrough baseline.
func (r *Resolver) Decide(vs Versions, dec *schema.CallDecoder, event []byte, c *schema.Call, d *schema.Decision) bool {
	if err := dec.Decode(event, c); err != nil {
		Malformed(err, d)
		return false
	}
	if vs == nil {
		d.Reset()
		d.EventID = c.EventID
		return true
	}
	r.Resolve(vs, c, d)
	return true
}
