package otlp

import (
	"testing"
)

// FuzzDecode: any bytes, as either signal in either encoding, decode
// without a panic, within the limits, into calls and listings that encode
// as contract events package schema reads back.
func FuzzDecode(f *testing.F) {
	for _, s := range []struct {
		file string
		sig  Signal
	}{
		{"vercel.traces.json", Traces}, {"openai-chat.logs.json", Logs}, {"openai-responses.logs.json", Logs},
		{"openinference.traces.json", Traces}, {"mcp.traces.json", Traces},
	} {
		b := readFixture(f, s.file)
		f.Add(b, uint8(s.sig), uint8(JSON))
		f.Add(toProto(f, s.sig, b), uint8(s.sig), uint8(Proto))
	}
	lim := Limits{MaxPayload: 1 << 16, MaxAttributes: 256, MaxValueBytes: 1 << 14, MaxDepth: 16, MaxItems: 256}
	f.Fuzz(func(t *testing.T, payload []byte, sig, enc uint8) {
		s, e := Signal(sig%2+1), Encoding(enc%2+1)
		r, err := Decode(payload, s, e, lim)
		if err != nil {
			return
		}
		if len(r.Calls)+len(r.Listings) > 8*len(payload)+1 {
			t.Fatalf("%d calls and listings from %d bytes", len(r.Calls)+len(r.Listings), len(payload))
		}
		checkEncodable(t, r)
	})
}
