package htb

import (
	"github.com/toolaudit/toolaudit/signature"
	"testing"
)

func TestConvertAPIBank(t *testing.T) {
	tools, warnings := ConvertAPIBank([]APIBankAPI{
		{Name: "RecordHealthData", Description: "d", InputParameters: map[string]APIBankParam{
			"user_id":     {Type: "str", Description: "u"},
			"time":        {Type: "str"},
			"health_data": {Type: "list"},
			"weight":      {Type: "float"},
			"steps":       {Type: "int"},
			"fasting":     {Type: "bool"},
			"extra":       {Type: "dict"},
			"when":        {Type: "datetime"},
		}},
		{Name: "DeleteAlarm", InputParameters: map[string]APIBankParam{"time": {Type: "str"}}},
		{Name: "QueryStock", InputParameters: map[string]APIBankParam{}},
	})
	if len(tools) != 3 || tools[0]["name"] != "DeleteAlarm" {
		t.Fatalf("tools not sorted by name: %v", tools)
	}
	in := tools[2]["inputSchema"].(obj)
	props := in["properties"].(obj)
	for k, want := range map[string]string{"user_id": "string", "health_data": "array", "weight": "number", "steps": "integer", "fasting": "boolean", "extra": "object"} {
		if got := props[k].(obj)["type"]; got != want {
			t.Errorf("%s: type %v, want %s", k, got, want)
		}
	}
	if _, ok := props["when"].(obj)["type"]; ok || len(warnings) != 1 {
		t.Errorf("datetime should stay unconstrained with one warning; got %v", warnings)
	}
	if req := schemaRequired(in); len(req) != 8 {
		t.Errorf("every parameter should be required, got %v", req)
	}
	if _, ok := tools[2]["inputSchema"].(obj)["additionalProperties"]; ok {
		t.Error("converter should leave the object closed by the contract's default")
	}
	for i, want := range []Risk{RiskDestructive, RiskRead, RiskWrite} {
		if got := contractOf(tools[i]).Risk; got != want {
			t.Errorf("%s: risk %s, want %s", tools[i]["name"], got, want)
		}
	}
	if _, ok := tools[1]["inputSchema"].(obj)["required"]; ok {
		t.Error("a tool without parameters should have no required list")
	}
}

// TestAPIBankFixture: the embedded fixture converts cleanly and every
// hand-written honest call satisfies its converted signature.
func TestAPIBankFixture(t *testing.T) {
	apis, calls, err := loadAPIBank()
	if err != nil {
		t.Fatal(err)
	}
	tools, warnings := ConvertAPIBank(apis)
	if len(warnings) > 0 {
		t.Errorf("fixture warnings: %v", warnings)
	}
	w, err := newWorld([][]byte{listingLine("l", "apibank", "", 0, epoch, tools)})
	if err != nil {
		t.Fatal(err)
	}
	d := w.deployment("apibank", epoch)
	if len(d.all) != len(apis) || len(calls) != 24 {
		t.Fatalf("%d tools for %d apis, %d calls", len(d.all), len(apis), len(calls))
	}
	for _, c := range calls {
		td := d.tool("", c.APIName)
		if td == nil {
			t.Errorf("call to unknown API %s", c.APIName)
			continue
		}
		if res := td.Sig.Check(mustParse(t, c.Input)); res.Kind != signature.Pass {
			t.Errorf("%s: honest fixture call fails its signature: %s at %s", c.APIName, res.Reason, res.Path)
		}
	}
}
