package ingest

import (
	"strings"
	"testing"
	"time"
)

// A log line is read as the agent's own parser reads it, or refused: a
// member that encoding/json would take for a field only by folding case
// ("FUNCTION" for "function"), a repeated member and invalid UTF-8 are
// errors of the line, naming what is wrong; members of other names are
// ignored as before.
func TestExactNames(t *testing.T) {
	const call = `{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}}]}`
	for _, tc := range []struct {
		name, line, want string // want: "" converts to get_weather
	}{
		{"exact", call, ""},
		{"other members", strings.Replace(call, `"id":"c1",`, `"id":"c1","logprobs":null,"x_vendor":{"Name":1},`, 1), ""},
		{"folded after the exact", strings.Replace(call, `"arguments":"{}"}`, `"arguments":"{}"},"FUNCTION":{"name":"wipe_disk","arguments":"{}"}`, 1),
			`/choices/0/message/tool_calls/0: member "FUNCTION" is not "function"`},
		{"folded alone", strings.Replace(call, `"name":"get_weather"`, `"NAME":"get_weather"`, 1),
			`/choices/0/message/tool_calls/0/function: member "NAME" is not "name"`},
		{"folded by Unicode", strings.Replace(call, `"tool_calls"`, `"tool_callſ"`, 1), `member "tool_callſ" is not "tool_calls"`}, // ſ folds to s
		{"folded top", strings.Replace(call, `"choices"`, `"Choices"`, 1), `unknown format`},
		{"repeated", strings.Replace(call, `"name":"get_weather"`, `"name":"get_weather","name":"wipe_disk"`, 1), `repeat`},
		{"invalid UTF-8", strings.Replace(call, `"id":"c1"`, "\"id\":\"c\xff\"", 1), "UTF-8"},
		{"anthropic", `{"type":"message","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{},"Name":"wipe_disk"}]}`,
			`/0: member "Name" is not "name"`},
		{"bedrock", `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"b1","name":"get_weather","input":{},"NAME":"wipe_disk"}}]}}}`,
			`/output/message/content/0/toolUse: member "NAME" is not "name"`},
		{"mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather","arguments":{},"Name":"wipe_disk"}}`,
			`/params: member "Name" is not "name"`},
		{"envelope", `{"emitted_at":"2026-11-29T10:00:00Z","Registry":"other","openai":` + call + `}`,
			`/: member "Registry" is not "registry"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := convertOne(t, FormatUnknown, Meta{Time: time.Now(), Registry: "fleet"}, tc.line)
			if tc.want == "" {
				if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Value), `"tool":"get_weather"`) {
					t.Fatalf("%v, %d events: want get_weather", err, len(evs))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q (events %d)", err, tc.want, len(evs))
			}
		})
	}
}
