// Package approvalsapi is POST /v1/approvals: an approval, rejection or
// revocation of a tool definition over authenticated HTTP. Only the
// bearer tokens of the approvers' file may approve (the role is
// membership of that file), and the token's name, not anything the
// request says, is who approved: the approval event written to the
// approvals topic (acknowledged before the answer) is the audit record
// of the approval, and it is logged.
package approvalsapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/httpapi/apierror"
	"github.com/toolaudit/toolaudit/internal/bearer"
	"github.com/toolaudit/toolaudit/internal/promutil"
)

// Path is the endpoint.
const Path = "/v1/approvals"

// maxBody bounds a request: an approval is a few hundred bytes.
const maxBody = 64 << 10

// Config is what New needs.
type Config struct {
	// Approvers are the tokens that may approve; required.
	Approvers *bearer.Tokens
	// Tokens are the API's (resolverd run --http-tokens-file); nil: none.
	// A token valid there but not an approver's is authenticated but
	// not allowed to approve: 403 not_approver, not 401 (which would
	// tell its holder to fix a token that is fine).
	Tokens *bearer.Tokens
	// Write writes an event to the approvals topic, acknowledged, and
	// returns the baseline version after it (topic.Produce).
	Write func(context.Context, *approvals.Event) (int64, error)
	// Logger; nil logs nothing. Registerer; nil registers no metrics.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time // tests; nil: time.Now
}

type handler struct {
	cfg     Config
	seq     atomic.Int64
	written *prometheus.CounterVec
}

// New returns the handler of POST /v1/approvals.
func New(cfg Config) (http.Handler, error) {
	if cfg.Approvers == nil || cfg.Write == nil {
		return nil, errors.New("approvalsapi: Approvers and Write are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &handler{cfg: cfg}
	h.written = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolaudit_api_approvals_total",
		Help: "POST /v1/approvals requests by outcome: approve, reject and revoke written, or refused (unauthorized, forbidden: a valid API token that is not an approver's, bad_request, unavailable).",
	}, []string{"outcome"})
	if err := promutil.Register(cfg.Registerer, h.written); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		apierror.Write(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
		return
	}
	by, err := h.cfg.Approvers.Authorize(r)
	if errors.Is(err, bearer.ErrInvalid) && h.cfg.Tokens != nil {
		if name, terr := h.cfg.Tokens.Authorize(r); terr == nil {
			h.written.WithLabelValues("forbidden").Inc()
			apierror.Write(w, http.StatusForbidden, "not_approver", "not an approver: the token "+strconv.Quote(name)+
				" is valid for /v1/resolve but not an approver's (resolverd run --http-approvers-file)")
			return
		}
	}
	if err != nil {
		h.written.WithLabelValues("unauthorized").Inc()
		status, challenge := bearer.Refusal(err, "toolaudit-approvals")
		if challenge != "" {
			w.Header().Set("WWW-Authenticate", challenge)
		}
		apierror.Write(w, status, "unauthorized", err.Error()+": an approver's token is required (resolverd run --http-approvers-file)")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		h.written.WithLabelValues("bad_request").Inc()
		apierror.Write(w, http.StatusBadRequest, "bad_request", "read the request: "+err.Error())
		return
	}
	e, err := approvals.DecodeRequest(body)
	if err == nil {
		e.By, e.At = by, h.cfg.Now().UTC().Truncate(time.Millisecond)
		e.EventID = "approval-" + strconv.FormatInt(e.At.UnixNano(), 36) + "-" + strconv.FormatInt(h.seq.Add(1), 36)
		err = e.Validate()
	}
	if err != nil {
		h.written.WithLabelValues("bad_request").Inc()
		apierror.Write(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	v, err := h.cfg.Write(r.Context(), e)
	if err != nil {
		// Not recorded: said, and nothing is in force.
		h.written.WithLabelValues("unavailable").Inc()
		h.cfg.Logger.Error("approval not recorded", "by", by, "verb", e.Verb, "registry", e.Registry, "server", e.Server, "tool", e.Tool, "digest", e.Digest, "err", err)
		apierror.Write(w, http.StatusServiceUnavailable, "approvals_unavailable", "the approval was not recorded: "+err.Error())
		return
	}
	h.written.WithLabelValues(string(e.Verb)).Inc()
	h.cfg.Logger.Info("approval recorded", "by", by, "verb", e.Verb, "registry", e.Registry, "server", e.Server, "tool", e.Tool,
		"digest", e.Digest, "reason", e.Reason, "baseline_version", v, "event_id", e.EventID)
	b := e.AppendJSON(nil)
	b = append(b[:len(b)-1], `,"baseline_version":`...)
	b = strconv.AppendInt(b, v, 10)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(b, "}\n"...))
}
