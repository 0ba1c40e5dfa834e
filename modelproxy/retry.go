package modelproxy

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strconv"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/registry/declared"
)

// retryStats are what the headers say of a response: calls decided and
// rejected over every attempt, the ids withheld from the client, the
// repair requests sent.
type retryStats struct {
	calls, rejected, retries int
	withheld                 []string
}

// Tool results of a repair request: the fix of a rejected call, and what
// a call that resolves is told (it is kept, has not run, and must not be
// asked again: the client receives it with the corrected calls).
const (
	repairRejected = "toolaudit rejected this call; it was not executed: "
	repairKept     = "toolaudit: this call resolves and is kept as it is; it has not run yet and will run once the other calls of this turn are corrected. Do not call it again: correct only the calls reported as errors."
)

// retry answers the model itself: while a response has rejected calls,
// and for at most the route's retries and within its retry deadline, it
// sends the upstream the conversation so far plus the model's turn and a
// tool result for each of its calls (the fix text of a rejected one as
// that tool's error, repairKept for one that resolves), and decides the
// answer. The client receives the last response, carrying before its own
// calls the calls of earlier attempts that resolved (a repeat of one of
// them is dropped, so that none runs twice), usage summed over every
// attempt; if calls are still rejected then, the block answer of that
// response. An attempt the upstream fails (an error, a timeout, a
// response not understood) ends the retries with the block answer of the
// last response decided. The error is the audit trail's (ErrUnrecorded).
func (p *Proxy) retry(ctx context.Context, r *http.Request, rt *Route, rest string, body []byte, req *request, decl *declared.Set,
	resp response, d *decisions, st *retryStats) ([]byte, error) {
	dctx, cancel := context.WithTimeout(ctx, rt.retryDeadline)
	defer cancel()
	var carried []json.RawMessage
	var carriedCalls []toolCall
	usage := resp.usage()
	for d.nRejected > 0 && st.retries < rt.Retries && dctx.Err() == nil && resp.repairable() {
		next, err := resp.repair(body, repairResults(d.rejected, d.fixes), d.rejected)
		if err != nil {
			p.log.Warn("repair request not built: block answer", "route", rt.Prefix, "err", err)
			break
		}
		at, _, msg := p.exchange(dctx, r, rt, rest, next)
		if msg != "" || at.up != nil {
			if at != nil {
				at.up.Body.Close()
				msg = "upstream answered " + strconv.Itoa(at.up.StatusCode)
			}
			p.log.Warn("repair request failed: block answer", "route", rt.Prefix, "attempt", st.retries+1, "err", msg)
			break
		}
		st.retries++
		if !at.resp.repairable() {
			// Not one model turn (OpenAI: no choice, or no message): its
			// calls cannot follow the ones carried; the last turn's block
			// answer goes out instead, and this one is not delivered.
			p.log.Warn("repair answer not one model turn: block answer", "route", rt.Prefix, "attempt", st.retries)
			break
		}
		raws := resp.rawCalls()
		earlier := carriedCalls[:len(carriedCalls):len(carriedCalls)]
		for i, c := range resp.calls() {
			// A call kept that repeats one carried from an earlier attempt
			// is carried once: none runs twice (the calls of one turn are
			// the model's own, equal or not).
			if !d.rejected[i] && !repeats(c, earlier) {
				carried, carriedCalls = append(carried, raws[i]), append(carriedCalls, c)
			}
		}
		nd, err := p.decide(ctx, rt, req, decl, at.resp.id(), at.resp.model(), at.resp.calls())
		if err != nil {
			return nil, err
		}
		st.calls += len(at.resp.calls())
		st.rejected += nd.nRejected
		usage = sumUsage(usage, at.resp.usage())
		body, resp, d = next, at.resp, nd
	}
	// What reaches the client: the carried calls, then this response's
	// own but those rejected and the repeats of a carried one.
	drop := append(make([]bool, len(carried)), d.rejected...)
	cut := d.nRejected > 0
	for i, c := range resp.calls() {
		if repeats(c, carriedCalls) {
			drop[len(carried)+i] = true
			cut = true
		}
	}
	resp.merge(carried, carriedCalls, usage)
	if !cut {
		return resp.encode()
	}
	for i, rej := range d.rejected {
		if rej {
			st.withheld = append(st.withheld, resp.calls()[len(carried)+i].id)
		}
	}
	return resp.withhold(drop, d.note)
}

// repairResults are the tool results of a repair request: a rejected
// call's fix text as its error, repairKept for a call that resolves.
func repairResults(rejected []bool, fixes []string) []string {
	results := make([]string, len(rejected))
	for i, rej := range rejected {
		results[i] = repairKept
		if rej {
			results[i] = repairRejected + fixes[i]
		}
	}
	return results
}

// repeats reports whether c repeats one of calls (same name, same
// arguments): a call already sent, which is dropped so that none runs
// twice.
func repeats(c toolCall, calls []toolCall) bool {
	for _, k := range calls {
		if c.name == k.name && sameArgs(c, k) {
			return true
		}
	}
	return false
}

// sameArgs reports whether two calls carry the same arguments: equal
// JSON values as a client reads them (members in any order, numbers by
// value, strings unescaped: jsontape.Equal), or the same text.
func sameArgs(a, b toolCall) bool {
	if a.args == nil || b.args == nil {
		return a.args == nil && b.args == nil && a.raw != nil && b.raw != nil && *a.raw == *b.raw
	}
	x, y := tapes.Get().(*jsontape.Tape), tapes.Get().(*jsontape.Tape)
	defer tapes.Put(x)
	defer tapes.Put(y)
	return x.Parse(a.args) == nil && y.Parse(b.args) == nil && jsontape.Equal(x.Root(), y.Root())
}

// sumUsage adds two usage objects member by member: numbers are added,
// objects added in turn, anything else is b's (a's when b lacks it).
func sumUsage(a, b json.RawMessage) json.RawMessage {
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a, &x) != nil || x == nil {
		return b
	}
	if json.Unmarshal(b, &y) != nil || y == nil {
		return a
	}
	for k, v := range y {
		u, ok := x[k]
		if !ok {
			x[k] = v
			continue
		}
		var m, n json.Number
		switch {
		case json.Unmarshal(u, &m) == nil && json.Unmarshal(v, &n) == nil:
			if i, err := m.Int64(); err == nil {
				if j, err := n.Int64(); err == nil && (j <= 0 || i <= math.MaxInt64-j) && (j >= 0 || i >= math.MinInt64-j) {
					x[k] = json.RawMessage(strconv.FormatInt(i+j, 10))
					continue
				}
			}
			f, _ := m.Float64()
			g, _ := n.Float64()
			if sum := f + g; !math.IsInf(sum, 0) && !math.IsNaN(sum) {
				x[k] = json.RawMessage(strconv.FormatFloat(sum, 'g', -1, 64))
			} else {
				x[k] = v // past float64: the later count, still JSON
			}
		case len(u) > 0 && u[0] == '{' && len(v) > 0 && v[0] == '{':
			x[k] = sumUsage(u, v)
		default:
			x[k] = v
		}
	}
	return mustJSON(x)
}
