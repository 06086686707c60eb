package admin

import (
	"context"
	"fmt"
	"github.com/pgbranchproxy/pgbranchproxy/router"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
)

// AuditEntry is one line of the audit log, as GET /v1/audit returns it.
type AuditEntry struct {
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target,omitempty"`
	Result string    `json:"result"`
	Remote string    `json:"remote,omitempty"`
}

// recorder remembers a response's status, and the error a handler noted, for the
// audit log.
type recorder struct {
	http.ResponseWriter
	status    int
	err       string
	errStatus int  // the status err stands for, when the answer's is 200 (streamed)
	byFront   bool // a front answered itself (FrontError): no node saw the request
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Flush passes on flushes, for streamed answers.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// noteError records msg, an error of status, as the result of the request that w
// answers, for an answer whose status does not tell (a streamed one) or whose body
// does.
func noteError(w http.ResponseWriter, status int, msg string) {
	for {
		switch x := w.(type) {
		case *recorder:
			x.err, x.errStatus = msg, status
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

// result is how an audited request ended: "ok", or its status and error.
func (r *recorder) result() string {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	if r.err != "" && status < 400 && r.errStatus != 0 {
		status = r.errStatus
	}
	if status < 400 && r.err == "" {
		return "ok"
	}
	s := strconv.Itoa(status)
	if r.err != "" {
		s += " " + r.err
	}
	return s
}

// audit appends one entry to the log. It is written even when the client has gone;
// a failure is logged and does not change the answer, which has been sent.
func (a *API) audit(r *http.Request, c Caller, action, target string, rec *recorder) {
	remote := ""
	if c.Name != LocalActor {
		remote = r.RemoteAddr
	}
	e := catalog.AuditEntry{At: a.now(), Actor: c.Name, Action: action, Target: clip(storable(target), maxAuditTarget),
		Result: clip(storable(rec.result()), maxAuditResult), Remote: remote}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	if err := a.store.AppendAudit(ctx, e); err != nil {
		a.log.Error("audit log", zap.String("actor", e.Actor), zap.String("action", e.Action),
			zap.String("target", e.Target), zap.String("result", e.Result), zap.Error(err))
	}
}

// What an audit entry keeps of a request's target and result: names are at most
// 63 bytes, and a refused request's body must not grow the log by its size.
const (
	maxAuditTarget = 160
	maxAuditResult = 1024
)

// storable is s as every catalog stores it: valid UTF-8 without NUL.
func storable(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// clip is s cut to at most n bytes (on a rune boundary), marked when cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// listAudit serves GET /v1/audit[?since=DURATION|RFC3339 time].
func (a *API) listAudit(w http.ResponseWriter, r *http.Request) {
	since, err := ParseSince(r.URL.Query().Get("since"), a.now())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, Error{Error: err.Error()})
		return
	}
	entries, err := a.store.Audit(r.Context(), since)
	if err != nil {
		a.result(w, err)
		return
	}
	out := make([]AuditEntry, 0, len(entries))
	for _, e := range entries {
		out = append(out, AuditEntry{At: e.At, Actor: e.Actor, Action: e.Action, Target: e.Target, Result: e.Result, Remote: e.Remote})
	}
	writeJSON(w, http.StatusOK, out)
}

// ParseSince reads an audit ?since= (audit ls --since): "" (everything), a
// duration back from now as a TTL is written but with its unit (90m, 24h, 7d), an
// RFC 3339 time, or a date (2026-11-30, from its start in UTC).
func ParseSince(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		// A bare number: 2026 is a year to one reader, seconds to another.
		return time.Time{}, fmt.Errorf("since %q: add a unit (s, m, h, d) or write a date such as 2026-11-30", v)
	}
	if d, ok := router.ParseTTL(v); ok {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("since %q: want a duration such as 24h or 7d, a date such as 2026-11-30, or a time such as 2026-11-30T17:00:00Z", v)
}
