package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"go.uber.org/zap"
)

// Manager is what the API needs of the branch manager.
type Manager interface {
	AddSource(ctx context.Context, req branches.SourceRequest, progress func(string)) (branches.SourceInfo, error)
	RefreshSource(ctx context.Context, name string, progress func(string)) (branches.SourceInfo, error)
	RemoveSource(ctx context.Context, name string) error
	Sources() []branches.SourceInfo
	List() []branches.Info
	ListAll() []branches.Info
	SetWarm(ctx context.Context, source string, warm int) error
	HoldWarm(ctx context.Context, source string, warm int, ttl time.Duration) (string, error)
	ReleaseWarm(ctx context.Context, source, id string) error
	Create(ctx context.Context, name string, opts branches.CreateOptions) error
	Reset(ctx context.Context, source, name string, o branches.OpOptions) error
	Destroy(ctx context.Context, source, name string, o branches.OpOptions) error
	Stop(ctx context.Context, source, name string, o branches.OpOptions) error
	Set(ctx context.Context, source, name string, s branches.Settings) error
	Info() branches.ServerInfo
	Diff(ctx context.Context, name string, opts branches.DiffOptions) (branches.DiffResult, error)
	Nodes(ctx context.Context) ([]branches.NodeInfo, error)
	SetDraining(ctx context.Context, id string, draining bool) error
}

// Store keeps the API's tokens and its audit log; the catalog is one.
type Store interface {
	AddToken(ctx context.Context, t catalog.Token) error
	Tokens(ctx context.Context) ([]catalog.Token, error)
	RemoveToken(ctx context.Context, name string) error
	AppendAudit(ctx context.Context, e catalog.AuditEntry) error
	Audit(ctx context.Context, since time.Time) ([]catalog.AuditEntry, error)
}

// Config is what New needs. Manager and Store are required.
type Config struct {
	Manager Manager
	Store   Store
	// Metrics, if set, serves GET /metrics.
	Metrics http.Handler
	// Bootstrap is the --admin-token: a token of role admin named BootstrapName that
	// no catalog holds. "" for none.
	Bootstrap string
	// Now is the clock of the audit log (default time.Now).
	Now func() time.Time
}

// API serves the admin API. Make one with New; safe for concurrent use.
type API struct {
	m         Manager
	store     Store
	metricsH  http.Handler
	bootstrap []byte // HashSecret of Config.Bootstrap; nil for none
	now       func() time.Time
	log       *zap.Logger
	// forward, on a front, serves every route but the front's own (NewFront).
	forward Forward
}

// New returns the API for cfg.
func New(cfg Config, log *zap.Logger) (*API, error) {
	if cfg.Manager == nil || cfg.Store == nil {
		return nil, errors.New("admin: Manager and Store are required")
	}
	a := &API{m: cfg.Manager, store: cfg.Store, metricsH: cfg.Metrics, now: cfg.Now, log: log}
	if a.now == nil {
		a.now = time.Now
	}
	if cfg.Bootstrap != "" {
		a.bootstrap = HashSecret(cfg.Bootstrap)
	}
	return a, nil
}

// Local returns the handler for the admin socket, which only its owner (the
// user serve runs as) can reach: every request acts as LocalActor, with every
// permission.
func (a *API) Local() http.Handler {
	local := Caller{Name: LocalActor, Role: RoleAdmin}
	return a.mux(func(*http.Request) (Caller, int, string) { return local, 0, "" })
}

// Remote returns the handler for --admin-listen: every route but the Public ones
// needs "Authorization: Bearer <token>" of a role that the route allows.
func (a *API) Remote() http.Handler {
	return a.mux(func(r *http.Request) (Caller, int, string) {
		c, ok, err := a.authenticate(r)
		if err != nil {
			a.log.Error("read admin tokens", zap.Error(err))
			return Caller{}, http.StatusServiceUnavailable, "cannot read the admin tokens: see the server log"
		}
		if !ok {
			a.log.Info("admin request without a valid token", zap.String("remote", r.RemoteAddr),
				zap.String("method", r.Method), zap.String("path", r.URL.Path))
			return Caller{}, http.StatusUnauthorized, "missing or wrong bearer token"
		}
		return c, 0, ""
	})
}

func withCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }

func (a *API) metrics(w http.ResponseWriter, r *http.Request) {
	if a.metricsH == nil {
		http.NotFound(w, r)
		return
	}
	a.metricsH.ServeHTTP(w, r)
}

// info answers the server's ServerInfo and the caller's role, which tells a client
// what it may read besides (role ci: not /metrics).
func (a *API) info(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		branches.ServerInfo
		Role string `json:"role,omitempty"`
	}{a.m.Info(), CallerFrom(r.Context()).Role})
}

// sources lists the sources. A ci token is not told the branch a source was seeded
// from (from) unless that branch is under its prefix: it is shown no other branch.
func (a *API) sources(w http.ResponseWriter, r *http.Request) {
	out := a.m.Sources()
	if c := CallerFrom(r.Context()); c.Role == RoleCI {
		for i := range out {
			if _, branch, _ := strings.Cut(out[i].From, "/"); !c.Owns(branch) {
				out[i].From = ""
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) refreshSource(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	a.streamSeed(w, name, func(progress func(string)) (branches.SourceInfo, error) {
		return a.m.RefreshSource(r.Context(), name, progress)
	})
}

func (a *API) removeSource(w http.ResponseWriter, r *http.Request) {
	a.result(w, a.m.RemoveSource(r.Context(), r.PathValue("name")))
}

// listBranches lists every branch (with ?all=true warm pool members too); a ci
// token sees only those under its prefix.
func (a *API) listBranches(w http.ResponseWriter, r *http.Request) {
	all := a.m.List()
	if q := r.URL.Query().Get("all"); q == "true" || q == "1" {
		all = a.m.ListAll()
	}
	c := CallerFrom(r.Context())
	out := make([]branches.Info, 0, len(all))
	for _, b := range all {
		if c.Role != RoleCI || c.Owns(b.Name) {
			out = append(out, b)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) listNodes(w http.ResponseWriter, r *http.Request) {
	ns, err := a.m.Nodes(r.Context())
	if err != nil {
		a.result(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ns)
}

func (a *API) drainNode(w http.ResponseWriter, r *http.Request) {
	a.result(w, a.m.SetDraining(r.Context(), r.PathValue("name"), true))
}

func (a *API) resumeNode(w http.ResponseWriter, r *http.Request) {
	a.result(w, a.m.SetDraining(r.Context(), r.PathValue("name"), false))
}

func (a *API) resetBranch(w http.ResponseWriter, r *http.Request) {
	a.branchOp(w, r, a.m.Reset)
}

func (a *API) stopBranch(w http.ResponseWriter, r *http.Request) {
	a.branchOp(w, r, a.m.Stop)
}

// branchOp runs a reset, stop or destroy of the branch the request names, with
// ?force=true ending its sessions rather than being refused while it has some.
func (a *API) branchOp(w http.ResponseWriter, r *http.Request, op func(context.Context, string, string, branches.OpOptions) error) {
	q := r.URL.Query()
	var o branches.OpOptions
	if f := q.Get("force"); f != "" {
		var err error
		if o.Force, err = strconv.ParseBool(f); err != nil {
			a.result(w, fmt.Errorf("force=%q: want true or false: %w", f, branches.ErrInvalid))
			return
		}
	}
	a.result(w, op(r.Context(), q.Get("source"), r.PathValue("name"), o))
}

func (a *API) setBranch(w http.ResponseWriter, r *http.Request) {
	var s branches.Settings
	if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
		a.result(w, fmt.Errorf("invalid JSON: %v: %w", err, branches.ErrInvalid))
		return
	}
	a.result(w, a.m.Set(r.Context(), r.URL.Query().Get("source"), r.PathValue("name"), s))
}

func (a *API) destroyBranch(w http.ResponseWriter, r *http.Request) {
	a.branchOp(w, r, a.m.Destroy)
}

// Error is the body of a failed request.
type Error struct {
	Error string `json:"error"`
}

// Progress is one line of a streamed source build: exactly one of the fields is set.
type Progress struct {
	Progress string               `json:"progress,omitempty"`
	Source   *branches.SourceInfo `json:"source,omitempty"`
	Error    string               `json:"error,omitempty"`
	// Status is, with Error, the HTTP status the build's failure would have had
	// had it come before the first progress line (404, 409, 400, 500, ...).
	Status int `json:"status,omitempty"`
}

// CreateBranch is the body of POST /v1/branches.
type CreateBranch struct {
	Name      string       `json:"name"`
	Source    string       `json:"source,omitempty"`
	From      string       `json:"from,omitempty"`
	TTL       branches.TTL `json:"ttl,omitempty"`
	Quota     int64        `json:"quota,omitempty"`
	Ephemeral bool         `json:"ephemeral,omitempty"`
}

func (a *API) addSource(w http.ResponseWriter, r *http.Request) {
	var req branches.SourceRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		a.result(w, fmt.Errorf("invalid JSON: %v: %w", err, branches.ErrInvalid))
		return
	}
	if path, onHost := hostPath(req); refuseHostPath(w, CallerFrom(r.Context()), path, onHost) {
		return
	}
	a.streamSeed(w, req.Name, func(progress func(string)) (branches.SourceInfo, error) {
		return a.m.AddSource(r.Context(), req, progress)
	})
}

// streamSeed runs a seed build, streaming its progress as newline-delimited JSON.
// A build refused before its first progress line (a bad name, a source that
// exists, a missing file) is answered with its status, as other requests are;
// once progress has been sent the status is 200, and the last line says how the
// build ended, with the status it would have had (Progress.Status).
func (a *API) streamSeed(w http.ResponseWriter, name string, build func(progress func(string)) (branches.SourceInfo, error)) {
	var mu sync.Mutex
	started := false
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	emit := func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		if !started {
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		enc.Encode(p)
		if flusher != nil {
			flusher.Flush()
		}
	}
	info, err := build(func(line string) { emit(Progress{Progress: line}) })
	if err != nil {
		mu.Lock()
		early := !started
		mu.Unlock()
		if early {
			a.result(w, err)
			return
		}
		a.log.Warn("build seed", zap.String("source", name), zap.Error(err))
		status := statusOf(err)
		emit(Progress{Error: err.Error(), Status: status})
		noteError(w, status, err.Error())
		return
	}
	emit(Progress{Source: &info})
}

func (a *API) createBranch(w http.ResponseWriter, r *http.Request) {
	var req CreateBranch
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		a.result(w, fmt.Errorf("invalid JSON: %v: %w", err, branches.ErrInvalid))
		return
	}
	a.result(w, a.m.Create(r.Context(), req.Name, branches.CreateOptions{Source: req.Source, From: req.From,
		TTL: time.Duration(req.TTL), Quota: req.Quota, Ephemeral: req.Ephemeral}))
}

func (a *API) result(w http.ResponseWriter, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	status := statusOf(err)
	if status == http.StatusInternalServerError {
		a.log.Error("admin request failed", zap.Error(err))
	}
	noteError(w, status, err.Error())
	writeJSON(w, status, Error{Error: err.Error()})
}

// statusOf is the HTTP status of a failed request's error.
func statusOf(err error) int {
	switch {
	case errors.Is(err, branches.ErrNotFound), errors.Is(err, catalog.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, branches.ErrExists), errors.Is(err, catalog.ErrExists), errors.Is(err, branches.ErrBusy), errors.Is(err, branches.ErrLost):
		return http.StatusConflict
	case errors.Is(err, branches.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, branches.ErrClosed), errors.Is(err, branches.ErrNotReady), errors.Is(err, branches.ErrDiskFull), errors.Is(err, branches.ErrTooMany),
		errors.Is(err, branches.ErrFenced), errors.Is(err, branches.ErrCatalogUnavailable), errors.Is(err, branches.ErrDraining),
		errors.Is(err, branches.ErrNotGone):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
