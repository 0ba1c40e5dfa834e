package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/toolaudit/toolaudit/schema"
)

// MCPAdapter converts MCP JSON-RPC messages: tools/call requests become
// calls and tools/list results become snapshot listings, pages merged (see
// the package documentation). It holds the open paginations of one
// source, so it must not be shared between sources or goroutines.
type MCPAdapter struct {
	pending map[string]*mcpPages // by listing key registry/server
}

type mcpPages struct {
	line   int  // first page
	meta   Meta // of the first page
	tools  []json.RawMessage
	cursor string
	failed bool // the first page was reported bad; later pages are dropped
}

// NewMCPAdapter returns an MCP adapter with no open pagination.
func NewMCPAdapter() *MCPAdapter {
	return &MCPAdapter{pending: make(map[string]*mcpPages)}
}

var mcpFallback = Meta{Surface: "mcp"}

type mcpMessage struct {
	Method string `json:"method"`
	Params *struct {
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
	Result *struct {
		Tools      *[]json.RawMessage `json:"tools"`
		NextCursor string             `json:"nextCursor"`
	} `json:"result"`
}

// Convert converts one JSON-RPC message. Requests and notifications other
// than tools/call, and results other than tools/list, are ignored.
func (a *MCPAdapter) Convert(line []byte, c Context, emit func(Event) error) error {
	o, err := decodeObject(line)
	if err != nil {
		return err
	}
	if o.kindOf("method") != '"' && o.kindOf("result") == 0 && o.kindOf("error") == 0 {
		return errShape("not a JSON-RPC request, notification or response")
	}
	var m mcpMessage
	if err := unmarshal(line, &m); err != nil {
		return errShape(err.Error())
	}
	switch {
	case m.Method == "tools/call":
		if m.Params == nil || m.Params.Name == nil {
			return errShape("tools/call without params.name")
		}
		args := argsFromJSON(m.Params.Arguments)
		if (object{"a": m.Params.Arguments}).kindOf("a") == 'n' || len(m.Params.Arguments) == 0 {
			args = argsFromJSON(json.RawMessage("{}")) // MCP: no arguments means none
		}
		return emitCalls(c, mcpFallback, []callAt{{tc: toolCall{name: *m.Params.Name, args: args}}}, emit)
	case m.Method != "":
		return nil
	case m.Result != nil && m.Result.Tools != nil:
		return a.page(c, *m.Result.Tools, m.Result.NextCursor, emit)
	default:
		return nil
	}
}

// page adds one tools/list result, emitting the listing when it is the last
// page.
func (a *MCPAdapter) page(c Context, tools []json.RawMessage, next string, emit func(Event) error) error {
	meta := c.resolve(Meta{}, mcpFallback)
	key := schema.ListingKey(meta.Registry, meta.Server)
	p := a.pending[key]
	if p == nil {
		p = &mcpPages{line: c.Line, meta: meta}
		if meta.Time.IsZero() {
			p.failed = true
		}
	}
	for _, t := range tools {
		p.tools = append(p.tools, compact(t))
	}
	p.cursor = next
	if next != "" {
		a.pending[key] = p
		if p.failed && p.line == c.Line {
			return ErrNoTime
		}
		return nil
	}
	delete(a.pending, key)
	if p.failed {
		if p.line == c.Line {
			return ErrNoTime
		}
		return nil // reported on the first page
	}
	return emit(newListing(p.meta, hashID("l-", c.Source, p.line, 0), p.tools))
}

// Flush reports every pagination still open as an error on its first line,
// and forgets it: a partial snapshot would drop tools downstream.
func (a *MCPAdapter) Flush(c Context, emit func(Event) error) error {
	keys := make([]string, 0, len(a.pending))
	for k := range a.pending {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return a.pending[keys[i]].line < a.pending[keys[j]].line })
	var errs []error
	for _, k := range keys {
		p := a.pending[k]
		if !p.failed {
			errs = append(errs, &LineError{
				Source: c.Source, Line: p.line, Format: FormatMCP,
				Err: fmt.Errorf("%w: listing %s: nextCursor %q never followed; %d tools not emitted", ErrIncompletePagination, k, p.cursor, len(p.tools)),
			})
		}
		delete(a.pending, k)
	}
	return errors.Join(errs...)
}
