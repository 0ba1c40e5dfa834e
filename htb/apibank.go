package htb

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
)

// API-Bank describes each API as a Python class with input_parameters
// {name: {"type": "str"|"int"|..., "description": ...}}. ConvertAPIBank
// turns such a registry into MCP tool objects:
//
//   - str → string, int → integer, float → number, bool → boolean,
//     list → array, dict → object (free-form); any other type name keeps
//     no type constraint and is reported;
//   - every input parameter is required (API-Bank has no optional marker
//     and its calls pass every parameter);
//   - the object is closed by the contract's rule (no additionalProperties);
//   - risk comes from the verb of the class name: Get/Query/Search/… read,
//     Delete/Remove/Cancel destructive, anything else write.

// APIBankAPI is one API of an API-Bank-style registry.
type APIBankAPI struct {
	Name             string                  `json:"name"`
	Description      string                  `json:"description"`
	InputParameters  map[string]APIBankParam `json:"input_parameters"`
	OutputParameters map[string]APIBankParam `json:"output_parameters"`
}

// APIBankParam is one parameter of an API-Bank API.
type APIBankParam struct {
	Type        string `json:"type"`
	Description string `json:"description"`
}

// APIBankCall is one call record of API-Bank: {"api_name", "input"}.
type APIBankCall struct {
	APIName string          `json:"api_name"`
	Input   json.RawMessage `json:"input"`
}

var apiBankTypes = map[string]string{
	"str": "string", "string": "string", "int": "integer", "float": "number",
	"bool": "boolean", "list": "array", "dict": "object",
}

var readVerbs = []string{"get", "query", "search", "check", "dictionary", "calculator", "list"}
var destructiveVerbs = []string{"delete", "remove", "cancel"}

// ConvertAPIBank converts an API-Bank-style registry into MCP tool
// objects, sorted by name, and lists what it could not map.
func ConvertAPIBank(apis []APIBankAPI) ([]obj, []string) {
	var tools []obj
	var warnings []string
	sorted := slices.Clone(apis)
	slices.SortFunc(sorted, func(a, b APIBankAPI) int { return compareStr(a.Name, b.Name) })
	for _, a := range sorted {
		props := obj{}
		req := make([]any, 0, len(a.InputParameters))
		for _, k := range sortedKeys(a.InputParameters) {
			p := a.InputParameters[k]
			ps := obj{}
			if p.Description != "" {
				ps["description"] = p.Description
			}
			if t, ok := apiBankTypes[p.Type]; ok {
				ps["type"] = t
			} else {
				warnings = append(warnings, fmt.Sprintf("%s.%s: type %q has no JSON Schema equivalent; left unconstrained", a.Name, k, p.Type))
			}
			props[k] = ps
			req = append(req, k)
		}
		in := obj{"type": "object", "properties": props}
		if len(req) > 0 {
			in["required"] = req
		}
		risk := RiskWrite
		verb := nameWords(a.Name)[0]
		switch {
		case slices.Contains(readVerbs, verb):
			risk = RiskRead
		case slices.Contains(destructiveVerbs, verb):
			risk = RiskDestructive
		}
		tools = append(tools, obj{"name": a.Name, "description": a.Description, "inputSchema": in, "annotations": annotationsFor(risk)})
	}
	return tools, warnings
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

//go:embed testdata/apibank/apis.json
var apiBankAPIs []byte

//go:embed testdata/apibank/calls.json
var apiBankCalls []byte

func loadAPIBank() ([]APIBankAPI, []APIBankCall, error) {
	var apis []APIBankAPI
	if err := json.Unmarshal(apiBankAPIs, &apis); err != nil {
		return nil, nil, fmt.Errorf("apibank apis: %w", err)
	}
	var calls []APIBankCall
	if err := json.Unmarshal(apiBankCalls, &calls); err != nil {
		return nil, nil, fmt.Errorf("apibank calls: %w", err)
	}
	return apis, calls, nil
}
