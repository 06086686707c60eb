package admin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Route is one admin API endpoint and the permission it needs. A new endpoint is
// one line in routes: its pattern, its Need, the action the audit log names it by,
// and its handler; Target only when the default does not fit.
type Route struct {
	// Pattern is an http.ServeMux pattern with its method: "POST /v1/branches/{name}/reset".
	Pattern string
	// Need is what the caller's token must allow.
	Need Need
	// Action names the route in the audit log ("branch.reset"; "" means the Pattern).
	// Requests that change something (any method but GET and HEAD) are logged, and
	// refused ones of every method.
	Action string
	// Target reads what a request acts on; nil means the {name} path value, which
	// for BranchRead and BranchWrite is also the branch a ci token must own.
	Target func(r *http.Request) Target
	// Handler serves the request once it is allowed.
	Handler http.HandlerFunc
}

// Target is what one request acts on.
type Target struct {
	// Name is what the audit log shows ("app/pr-1", "pr-1", a token's name).
	Name string
	// Branches are the branch names a ci token must own for the request to be allowed.
	Branches []string
}

// routes is the whole API: every endpoint and what it needs.
func (a *API) routes() []Route {
	return []Route{
		{Pattern: "GET /healthz", Need: Public, Handler: a.healthz},
		{Pattern: "GET /metrics", Need: Read, Handler: a.metrics},
		{Pattern: "GET /v1/info", Need: Discover, Handler: a.info},
		{Pattern: "GET /v1/sources", Need: Discover, Handler: a.sources},
		{Pattern: "POST /v1/sources", Need: Admin, Action: "source.add", Target: bodyTarget(false), Handler: a.addSource},
		{Pattern: "POST /v1/sources/{name}/refresh", Need: Admin, Action: "source.refresh", Handler: a.refreshSource},
		{Pattern: "DELETE /v1/sources/{name}", Need: Admin, Action: "source.remove", Handler: a.removeSource},
		{Pattern: "PATCH /v1/sources/{name}", Need: Admin, Action: "source.set", Handler: a.setSource},
		{Pattern: "POST /v1/sources/{name}/holds", Need: Admin, Action: "source.hold", Handler: a.holdWarm},
		{Pattern: "DELETE /v1/sources/{name}/holds/{id}", Need: Admin, Action: "source.release", Handler: a.releaseWarm},
		{Pattern: "GET /v1/branches", Need: BranchRead, Handler: a.listBranches},
		{Pattern: "POST /v1/branches", Need: BranchWrite, Action: "branch.create", Target: bodyTarget(true), Handler: a.createBranch},
		{Pattern: "POST /v1/branches/{name}/reset", Need: BranchWrite, Action: "branch.reset", Handler: a.resetBranch},
		{Pattern: "POST /v1/branches/{name}/stop", Need: Admin, Action: "branch.stop", Handler: a.stopBranch},
		{Pattern: "GET /v1/branches/{name}/diff", Need: BranchRead, Target: diffTarget, Handler: a.diffBranch},
		{Pattern: "PATCH /v1/branches/{name}", Need: Admin, Action: "branch.set", Handler: a.setBranch},
		{Pattern: "DELETE /v1/branches/{name}", Need: BranchWrite, Action: "branch.destroy", Handler: a.destroyBranch},
		{Pattern: "GET /v1/nodes", Need: Read, Handler: a.listNodes},
		{Pattern: "POST /v1/nodes/{name}/drain", Need: Admin, Action: "node.drain", Handler: a.drainNode},
		{Pattern: "POST /v1/nodes/{name}/resume", Need: Admin, Action: "node.resume", Handler: a.resumeNode},
		{Pattern: "GET /v1/tokens", Need: Admin, Handler: a.listTokens},
		{Pattern: "POST /v1/tokens", Need: Admin, Action: "token.create", Target: bodyTarget(false), Handler: a.createToken},
		{Pattern: "DELETE /v1/tokens/{name}", Need: Admin, Action: "token.remove", Handler: a.removeToken},
		{Pattern: "GET /v1/audit", Need: Read, Handler: a.listAudit},
	}
}

// pathTarget is the default Target: the {name} path value, qualified by ?source=.
func pathTarget(r *http.Request, n Need) Target {
	name := r.PathValue("name")
	t := Target{Name: qualify(r.URL.Query().Get("source"), name)}
	if name != "" && (n == BranchRead || n == BranchWrite) {
		t.Branches = []string{name}
	}
	return t
}

// bodyTarget reads the target from the JSON body's "name" (and "source"); with
// branch set, "name" and "from" are branches. The body is put back for the handler.
func bodyTarget(branch bool) func(r *http.Request) Target {
	return func(r *http.Request) Target {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(b))
		var body struct{ Name, Source, From string }
		if err != nil || json.Unmarshal(b, &body) != nil {
			return Target{}
		}
		t := Target{Name: body.Name}
		if branch {
			t.Name = qualify(body.Source, body.Name)
			if body.Name != "" {
				t.Branches = append(t.Branches, body.Name)
			}
			if body.From != "" {
				t.Branches = append(t.Branches, body.From)
			}
		}
		return t
	}
}

func qualify(source, name string) string {
	if source == "" || name == "" {
		return name
	}
	return source + "/" + name
}

// mux serves routes, each behind the caller check that who gives.
func (a *API) mux(who func(r *http.Request) (Caller, int, string)) *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range a.routes() {
		if a.forward != nil && !frontsOwn(rt) {
			rt.Handler = a.forward(rt)
		}
		mux.Handle(rt.Pattern, a.guard(rt, who))
	}
	return mux
}

// frontsOwn reports whether a front serves rt itself rather than passing it to
// a node: its health and its metrics.
func frontsOwn(rt Route) bool {
	return rt.Pattern == "GET /healthz" || rt.Pattern == "GET /metrics"
}

// guard checks the caller's permission for rt, serves it, and writes the audit entry.
func (a *API) guard(rt Route, who func(r *http.Request) (Caller, int, string)) http.Handler {
	action := rt.Action
	if action == "" {
		action = rt.Pattern
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.Need == Public {
			rt.Handler(w, r)
			return
		}
		c, status, msg := who(r)
		if status != 0 {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="pgbranchproxy"`)
			}
			writeJSON(w, status, Error{Error: msg})
			return
		}
		var t Target
		if rt.Target != nil {
			t = rt.Target(r)
		} else {
			t = pathTarget(r, rt.Need)
		}
		rec := &recorder{ResponseWriter: w}
		allowed := c.allows(rt.Need, t.Branches)
		if !allowed {
			msg := c.String() + " may not " + describe(action, t)
			writeJSON(rec, http.StatusForbidden, Error{Error: msg})
			rec.err = msg
		} else {
			rt.Handler(rec, r.WithContext(withCaller(r.Context(), c)))
		}
		audit := mutates(r.Method) || rec.status == http.StatusForbidden
		if a.forward != nil {
			// A node audits what it serves; a front, what it refused or could
			// not pass on.
			audit = !allowed || rec.byFront && mutates(r.Method)
		}
		if audit {
			a.audit(r, c, auditAction(action, r), t.Name, rec)
		}
	})
}

// auditAction is the audit log's name for a request of the route named action: a
// forced reset, stop or destroy (which ended the branch's sessions) says so.
func auditAction(action string, r *http.Request) string {
	if f, _ := strconv.ParseBool(r.URL.Query().Get("force")); f {
		return action + " --force"
	}
	return action
}

func mutates(method string) bool { return method != http.MethodGet && method != http.MethodHead }

// describe says what a refused request wanted, for its 403.
func describe(verb string, t Target) string {
	if len(t.Branches) > 0 {
		return verb + " branch " + strings.Join(t.Branches, " from ")
	}
	if t.Name != "" {
		return verb + " " + t.Name
	}
	return verb
}
