package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
)

// The protocol revisions the load generator speaks: one with sessions
// (initialize, Mcp-Session-Id) and the one without (each request
// carries the revision in its _meta and headers).
const (
	sessionRevision   = "2025-11-25"
	statelessRevision = "2026-07-28"
)

// statelessMeta is the _meta of every request of the stateless
// revision: its version and the client's capabilities (SEP-2575).
const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + statelessRevision + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"benchgateway","version":"1"}}`

// session is one MCP client over Streamable HTTP, spoken directly: the
// load generator's cost per call is one POST and a small decode, so that
// on a small machine it does not take the CPU the servers measured need
// (the Go SDK's client costs about as much per call as a server). Of
// the stateless revision it has no session id and no handshake.
type session struct {
	url, id  string
	revision string
	hc       *http.Client
	seq      atomic.Int64
}

// dial initializes a session of the revision (none for the stateless
// one).
func dial(ctx context.Context, hc *http.Client, url, revision string) (*session, error) {
	s := &session{url: url, hc: hc, revision: revision}
	if revision == statelessRevision {
		return s, nil
	}
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + revision + `","capabilities":{},"clientInfo":{"name":"benchgateway","version":"1"}}}`
	resp, err := s.post(ctx, []byte(init))
	if err != nil {
		return nil, err
	}
	s.id = resp.Header.Get("Mcp-Session-Id")
	if _, err := readResponse(resp); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if s.id == "" {
		return nil, errors.New("initialize: no session id")
	}
	resp, err = s.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return s, nil
}

func (s *session) post(ctx context.Context, body []byte, tool ...string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", s.revision)
	}
	if s.revision == statelessRevision {
		// The revision's standard headers repeat the body's version,
		// method and tool name.
		req.Header.Set("Mcp-Protocol-Version", s.revision)
		req.Header.Set("Mcp-Method", "tools/call")
		if len(tool) > 0 {
			req.Header.Set("Mcp-Name", tool[0])
		}
	}
	return s.hc.Do(req)
}

// call calls a tool; an error answer or a tool error is an error.
func (s *session) call(ctx context.Context, tool string, args json.RawMessage) error {
	b := make([]byte, 0, 128+len(args))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, s.seq.Add(1), 10)
	b = append(b, `,"method":"tools/call","params":{"name":`...)
	b = strconv.AppendQuote(b, tool)
	b = append(b, `,"arguments":`...)
	b = append(b, args...)
	if s.revision == statelessRevision {
		b = append(b, ',')
		b = append(b, statelessMeta...)
	}
	b = append(b, `}}`...)
	resp, err := s.post(ctx, b, tool)
	if err != nil {
		return err
	}
	msg, err := readResponse(resp)
	if err != nil {
		return err
	}
	var m struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result struct {
			IsError bool `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return err
	}
	if m.Error != nil {
		return fmt.Errorf("error %d: %s", m.Error.Code, m.Error.Message)
	}
	if m.Result.IsError {
		return errors.New("tool error")
	}
	return nil
}

// readResponse returns the JSON-RPC message of an answer, sent as JSON or
// as the data of the first event of a stream.
func readResponse(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if resp.Header.Get("Content-Type") == "application/json" {
		return io.ReadAll(resp.Body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		if data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
			msg := bytes.Clone(data)
			io.Copy(io.Discard, resp.Body) // the stream ends after the answer: keep the connection
			return msg, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("no answer in the event stream")
}
