package htb

import (
	"slices"
)

// The synthetic registries are built from ten resource domains and ten
// verbs: 100 tools such as create_issue, list_disks or restore_invoice.
// Every verb has its own argument shape (see verbSchema), so siblings
// overlap the way real APIs do: get/archive/restore all take the id,
// list and count share their filters, search requires what list allows.

type field struct {
	name   string
	schema obj
	create bool // required by create_<noun>
	filter bool // a filter of list_<nouns> and count_<nouns>
}

type domain struct {
	noun, plural string
	fields       []field
}

func str(extra ...any) obj {
	o := obj{"type": "string"}
	for i := 0; i+1 < len(extra); i += 2 {
		o[extra[i].(string)] = extra[i+1]
	}
	return o
}

func enum(vals ...string) obj {
	e := make([]any, len(vals))
	for i, v := range vals {
		e[i] = v
	}
	return obj{"type": "string", "enum": e}
}

func integer(lo, hi int64) obj {
	return obj{"type": "integer", "minimum": jint(lo), "maximum": jint(hi)}
}

func array(items obj, maxItems int64) obj {
	return obj{"type": "array", "items": items, "maxItems": jint(maxItems)}
}

func object(props obj, required ...string) obj {
	r := make([]any, len(required))
	for i, k := range required {
		r[i] = k
	}
	o := obj{"type": "object", "properties": props}
	if len(r) > 0 {
		o["required"] = r
	}
	return o
}

var domains = []domain{
	{"issue", "issues", []field{
		{"title", str("minLength", jint(1), "maxLength", jint(256)), true, false},
		{"body", str(), false, false},
		{"state", enum("open", "closed"), false, true},
		{"labels", array(str("maxLength", jint(50)), 10), false, false},
		{"priority", integer(1, 5), false, true},
		{"assignee", str(), false, true},
	}},
	{"file", "files", []field{
		{"path", str("minLength", jint(1)), true, false},
		{"content", str(), false, false},
		{"encoding", enum("utf-8", "base64"), false, false},
		{"mode", enum("overwrite", "append"), false, false},
		{"owner", str(), false, true},
	}},
	{"user", "users", []field{
		{"email", str("format", "email"), true, false},
		{"display_name", str("maxLength", jint(64)), false, false},
		{"role", enum("admin", "member", "viewer"), false, true},
		{"active", obj{"type": "boolean"}, false, true},
		{"address", object(obj{
			"street":  str(),
			"city":    str("minLength", jint(1)),
			"country": str("minLength", jint(2), "maxLength", jint(2)),
		}, "city", "country"), false, false},
	}},
	{"invoice", "invoices", []field{
		{"customer_id", str("minLength", jint(3)), true, true},
		{"amount", obj{"type": "number", "minimum": jint(0), "maximum": jint(100000)}, true, false},
		{"currency", enum("USD", "EUR", "GBP"), true, false},
		{"due_date", str("format", "date"), false, false},
		{"status", enum("draft", "sent", "paid"), false, true},
		{"lines", array(object(obj{
			"sku": str("minLength", jint(1)),
			"qty": integer(1, 1000),
		}, "sku", "qty"), 20), false, false},
	}},
	{"ticket", "tickets", []field{
		{"subject", str("minLength", jint(1), "maxLength", jint(120)), true, false},
		{"description", str(), false, false},
		{"severity", enum("low", "medium", "high", "critical"), false, true},
		{"tags", array(str(), 8), false, false},
		{"queue", str(), false, true},
	}},
	{"disk", "disks", []field{
		{"size_gb", integer(1, 16384), true, false},
		{"zone", enum("eu-west-1a", "eu-west-1b", "us-east-1a"), true, true},
		{"kind", enum("ssd", "hdd"), false, true},
		{"encrypted", obj{"type": "boolean"}, false, false},
	}},
	{"repo", "repos", []field{
		{"name", str("minLength", jint(1), "maxLength", jint(100)), true, false},
		{"visibility", enum("public", "private", "internal"), false, true},
		{"description", str("maxLength", jint(350)), false, false},
		{"default_branch", str(), false, false},
	}},
	{"message", "messages", []field{
		{"channel", str("minLength", jint(1)), true, true},
		{"text", str("minLength", jint(1), "maxLength", jint(4000)), true, false},
		{"thread_ts", str(), false, false},
		{"mentions", array(str(), 20), false, false},
	}},
	{"event", "events", []field{
		{"title", str("minLength", jint(1)), true, false},
		{"start", str("format", "date-time"), true, false},
		{"end", str("format", "date-time"), false, false},
		{"attendees", array(str("format", "email"), 50), false, false},
		{"calendar", str(), false, true},
		{"recurrence", object(obj{
			"freq":  enum("daily", "weekly", "monthly"),
			"count": integer(1, 52),
		}, "freq"), false, false},
	}},
	{"record", "records", []field{
		{"table", str("minLength", jint(1)), true, true},
		{"values", obj{"type": "object", "description": "column values"}, true, false},
		{"ttl_seconds", obj{"type": "integer", "minimum": jint(0)}, false, false},
	}},
}

// verbs, in tool order, with the risk each carries.
var verbs = []struct {
	name string
	risk Risk
}{
	{"create", RiskWrite}, {"get", RiskRead}, {"list", RiskRead}, {"update", RiskWrite},
	{"delete", RiskDestructive}, {"search", RiskRead}, {"archive", RiskWrite},
	{"export", RiskRead}, {"restore", RiskWrite}, {"count", RiskRead},
}

// style is how one server shapes the same domain: the keys that identify
// a resource, and options added to every tool.
type style struct {
	// idStyle: "noun" gives <noun>_id; "project" gives id + project.
	idStyle string
	// extra optional properties added to every tool (cloud's region).
	extra obj
	// drop lists fields this (older) server version does not have.
	drop []string
	// open: the hub's schemas take anything beside a target.
	open bool
}

func toolName(verb string, d domain) string {
	switch verb {
	case "list", "search", "export", "count":
		return verb + "_" + d.plural
	}
	return verb + "_" + d.noun
}

// verbSchema builds the inputSchema of verb over domain d in style st.
func verbSchema(verb string, d domain, st style) (props obj, required []string, scoped []string) {
	props = obj{}
	var fields []field
	for _, f := range d.fields {
		if !slices.Contains(st.drop, f.name) {
			fields = append(fields, f)
		}
	}
	id := func() {
		if st.idStyle == "project" {
			props["id"] = str("minLength", jint(3))
			props["project"] = str("minLength", jint(1))
			required = append(required, "id", "project")
			scoped = append(scoped, "id")
			return
		}
		k := d.noun + "_id"
		props[k] = str("minLength", jint(3))
		required = append(required, k)
		scoped = append(scoped, k)
	}
	filters := func() {
		for _, f := range fields {
			if f.filter {
				props[f.name] = f.schema
			}
		}
	}
	limit := integer(1, 100)
	switch verb {
	case "create":
		for _, f := range fields {
			props[f.name] = f.schema
			if f.create {
				required = append(required, f.name)
			}
		}
		if st.idStyle == "project" {
			props["project"] = str("minLength", jint(1))
			required = append(required, "project")
		}
	case "get":
		id()
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		props["fields"] = array(enum(names...), int64(len(names)))
		props["include_deleted"] = obj{"type": "boolean"}
	case "list":
		filters()
		props["limit"] = limit
		props["cursor"] = str()
		props["query"] = str()
	case "update":
		id()
		for _, f := range fields {
			props[f.name] = f.schema
		}
	case "delete":
		id()
		props["confirm"] = obj{"type": "boolean", "const": true}
		required = append(required, "confirm")
	case "search":
		props["query"] = str("minLength", jint(1))
		props["limit"] = limit
		props["order"] = enum("relevance", "newest")
		required = append(required, "query")
	case "archive":
		id()
		props["reason"] = str("maxLength", jint(200))
	case "export":
		props["format"] = enum("csv", "json", "ndjson")
		props["since"] = str("format", "date")
		required = append(required, "format")
	case "restore":
		id()
		props["revision"] = obj{"type": "integer", "minimum": jint(1)}
	case "count":
		filters()
		props["since"] = str("format", "date")
	}
	for k, v := range st.extra {
		props[k] = v
	}
	slices.Sort(required)
	return props, required, scoped
}

// domainTools returns the MCP tool objects of domains ds in style st.
func domainTools(ds []domain, st style) []obj {
	var tools []obj
	for _, d := range ds {
		for _, v := range verbs {
			name := toolName(v.name, d)
			var in obj
			contract := obj{}
			if st.open {
				in = obj{"type": "object", "properties": obj{
					"target":  str(),
					"payload": obj{"type": "object"},
				}, "required": []any{"target"}, "additionalProperties": true}
			} else {
				props, req, scoped := verbSchema(v.name, d, st)
				in = obj{"type": "object", "properties": props}
				if len(req) > 0 {
					r := make([]any, len(req))
					for i, k := range req {
						r[i] = k
					}
					in["required"] = r
				}
				if len(scoped) > 0 {
					sc := obj{}
					for _, k := range scoped {
						sc[k] = "t1-"
					}
					contract["scope"] = sc
				}
				if _, ok := props["amount"]; ok {
					contract["max"] = obj{"amount": jint(50000)}
				}
			}
			t := obj{
				"name":        name,
				"description": v.name + " " + d.noun + " resources",
				"inputSchema": in,
				"annotations": annotationsFor(v.risk),
			}
			if len(contract) > 0 {
				t["_meta"] = obj{"htb/contract": contract}
			}
			tools = append(tools, t)
		}
	}
	return tools
}

func pickDomains(nouns ...string) []domain {
	var out []domain
	for _, n := range nouns {
		for _, d := range domains {
			if d.noun == n {
				out = append(out, d)
			}
		}
	}
	return out
}
