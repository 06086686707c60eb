package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"go.uber.org/zap"
)

// Manager is what the API needs of the branch manager.
type Manager interface {
	AddSource(ctx context.Context, req branches.SourceRequest, progress func(string)) (branches.SourceInfo, error)
	RefreshSource(ctx context.Context, name string, progress func(string)) (branches.SourceInfo, error)
	RemoveSource(ctx context.Context, name string) error
	Sources() []branches.SourceInfo
	List() []branches.Info
	Create(ctx context.Context, name string, opts branches.CreateOptions) error
	Reset(ctx context.Context, source, name string) error
	Destroy(ctx context.Context, source, name string) error
	Stop(ctx context.Context, source, name string) error
	Set(ctx context.Context, source, name string, s branches.Settings) error
	Info() branches.ServerInfo
}

// Handler returns the API's HTTP handler. metrics, if set, serves /metrics.
func Handler(m Manager, metrics http.Handler, log *zap.Logger) http.Handler {
	a := &api{m: m, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /v1/info", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, m.Info()) })
	mux.HandleFunc("GET /v1/sources", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, m.Sources()) })
	mux.HandleFunc("POST /v1/sources", a.addSource)
	mux.HandleFunc("POST /v1/sources/{name}/refresh", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		a.streamSeed(w, name, func(progress func(string)) (branches.SourceInfo, error) {
			return a.m.RefreshSource(r.Context(), name, progress)
		})
	})
	mux.HandleFunc("DELETE /v1/sources/{name}", func(w http.ResponseWriter, r *http.Request) {
		a.result(w, m.RemoveSource(r.Context(), r.PathValue("name")))
	})
	mux.HandleFunc("GET /v1/branches", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, m.List()) })
	mux.HandleFunc("POST /v1/branches", a.createBranch)
	mux.HandleFunc("POST /v1/branches/{name}/reset", func(w http.ResponseWriter, r *http.Request) {
		a.result(w, m.Reset(r.Context(), r.URL.Query().Get("source"), r.PathValue("name")))
	})
	mux.HandleFunc("POST /v1/branches/{name}/stop", func(w http.ResponseWriter, r *http.Request) {
		a.result(w, m.Stop(r.Context(), r.URL.Query().Get("source"), r.PathValue("name")))
	})
	mux.HandleFunc("PATCH /v1/branches/{name}", func(w http.ResponseWriter, r *http.Request) {
		var s branches.Settings
		if err := json.NewDecoder(r.Body).Decode(&s); err != nil {
			writeJSON(w, http.StatusBadRequest, Error{Error: "invalid JSON: " + err.Error()})
			return
		}
		a.result(w, m.Set(r.Context(), r.URL.Query().Get("source"), r.PathValue("name"), s))
	})
	mux.HandleFunc("DELETE /v1/branches/{name}", func(w http.ResponseWriter, r *http.Request) {
		a.result(w, m.Destroy(r.Context(), r.URL.Query().Get("source"), r.PathValue("name")))
	})
	return mux
}

type api struct {
	m   Manager
	log *zap.Logger
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
}

// CreateBranch is the body of POST /v1/branches.
type CreateBranch struct {
	Name      string        `json:"name"`
	Source    string        `json:"source,omitempty"`
	From      string        `json:"from,omitempty"`
	TTL       time.Duration `json:"ttl,omitempty"`
	Quota     int64         `json:"quota,omitempty"`
	Ephemeral bool          `json:"ephemeral,omitempty"`
}

func (a *api) addSource(w http.ResponseWriter, r *http.Request) {
	var req branches.SourceRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, Error{Error: "invalid JSON: " + err.Error()})
		return
	}
	a.streamSeed(w, req.Name, func(progress func(string)) (branches.SourceInfo, error) {
		return a.m.AddSource(r.Context(), req, progress)
	})
}

// streamSeed runs a seed build, streaming its progress as newline-delimited JSON; the
// status is 200 from the start, and the last line says how it ended.
func (a *api) streamSeed(w http.ResponseWriter, name string, build func(progress func(string)) (branches.SourceInfo, error)) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	var mu sync.Mutex
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	emit := func(p Progress) {
		mu.Lock()
		defer mu.Unlock()
		enc.Encode(p)
		if flusher != nil {
			flusher.Flush()
		}
	}
	info, err := build(func(line string) { emit(Progress{Progress: line}) })
	if err != nil {
		a.log.Warn("build seed", zap.String("source", name), zap.Error(err))
		emit(Progress{Error: err.Error()})
		return
	}
	emit(Progress{Source: &info})
}

func (a *api) createBranch(w http.ResponseWriter, r *http.Request) {
	var req CreateBranch
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, Error{Error: "invalid JSON: " + err.Error()})
		return
	}
	a.result(w, a.m.Create(r.Context(), req.Name, branches.CreateOptions{Source: req.Source, From: req.From,
		TTL: req.TTL, Quota: req.Quota, Ephemeral: req.Ephemeral}))
}

func (a *api) result(w http.ResponseWriter, err error) {
	if err == nil {
		writeJSON(w, http.StatusOK, struct{}{})
		return
	}
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, branches.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, branches.ErrExists), errors.Is(err, branches.ErrBusy):
		status = http.StatusConflict
	case errors.Is(err, branches.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, branches.ErrClosed), errors.Is(err, branches.ErrNotReady), errors.Is(err, branches.ErrDiskFull), errors.Is(err, branches.ErrTooMany):
		status = http.StatusServiceUnavailable
	}
	if status == http.StatusInternalServerError {
		a.log.Error("admin request failed", zap.Error(err))
	}
	writeJSON(w, status, Error{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// RequireToken wraps h so that every path but /healthz needs
// "Authorization: Bearer <token>", compared in constant time.
func RequireToken(token string, h http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pgbranchproxy"`)
			writeJSON(w, http.StatusUnauthorized, Error{Error: "missing or wrong bearer token"})
			return
		}
		h.ServeHTTP(w, r)
	})
}
