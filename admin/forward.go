package admin

import (
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// A front has no branches: its admin API authenticates the caller as a node's
// would (tokens from the shared catalog, the admin socket's owner), checks that
// the caller may call the route, and passes the request to a node, with the
// caller in headers. The node serves it to the front (on its peer listener,
// which knows the front by its cluster certificate), checks the caller again,
// and writes the audit entry.

// Headers a front passes its caller in.
const (
	headerCallerName   = "Pgbranch-Caller"
	headerCallerRole   = "Pgbranch-Caller-Role"
	headerCallerPrefix = "Pgbranch-Caller-Prefix"
	headerCallerRemote = "Pgbranch-Caller-Remote"
)

// Forward is what a front does with an allowed request of a route: pass it to
// a node (SetCaller says who asks).
type Forward func(rt Route) http.HandlerFunc

// NewFront returns the admin API of a front: its routes are the nodes', each
// served by forward once the caller is allowed; healthz and metrics are the
// front's own. It audits what it refuses or cannot pass on; what a node
// serves, the node audits.
func NewFront(store Store, metrics http.Handler, bootstrap string, forward Forward, log *zap.Logger) (*API, error) {
	if store == nil || forward == nil {
		return nil, errors.New("admin: a front's API needs a Store and a Forward")
	}
	a := &API{store: store, metricsH: metrics, forward: forward, log: log}
	a.now = time.Now
	if bootstrap != "" {
		a.bootstrap = HashSecret(bootstrap)
	}
	return a, nil
}

// passedOn are the headers of a caller's request a front passes to a node;
// the others (the token, the page's cookie with it) stay at the front.
var passedOn = []string{"Content-Type", "Accept", "Accept-Encoding", "User-Agent"}

// SetCaller gives out, the request to a node, the caller of r (the front's
// request, allowed) and of r's headers only those the node needs.
func SetCaller(out *http.Request, r *http.Request) {
	h := http.Header{}
	for _, k := range passedOn {
		if v := r.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	out.Header = h
	c := CallerFrom(r.Context())
	out.Header.Set(headerCallerName, c.Name)
	out.Header.Set(headerCallerRole, c.Role)
	out.Header.Set(headerCallerPrefix, c.Prefix)
	if c.Name != LocalActor {
		out.Header.Set(headerCallerRemote, r.RemoteAddr)
	}
}

// Forwarded returns the handler a node serves fronts with: the caller is the
// one the front passed, checked again against each route's need; front tells
// whether a request comes from a front, and its name. Audit entries name the
// caller and the front ("alice via front-1") and the caller's address.
func (a *API) Forwarded(front func(r *http.Request) (string, bool)) http.Handler {
	return a.mux(func(r *http.Request) (Caller, int, string) {
		name, ok := front(r)
		if !ok {
			return Caller{}, http.StatusForbidden, "the admin API on this listener serves fronts only"
		}
		c := Caller{Name: r.Header.Get(headerCallerName), Role: r.Header.Get(headerCallerRole), Prefix: r.Header.Get(headerCallerPrefix)}
		if c.Name == "" {
			return Caller{}, http.StatusUnauthorized, "the front passed no caller"
		}
		c.Name += " via " + name
		if remote := r.Header.Get(headerCallerRemote); remote != "" {
			r.RemoteAddr = remote
		}
		return c, 0, ""
	})
}

// FrontError answers a request a front could not pass on, with the admin API's
// error body; the front audits it, since no node saw it.
func FrontError(w http.ResponseWriter, status int, msg string) {
	if rec, ok := w.(*recorder); ok {
		rec.byFront = true
	}
	writeJSON(w, status, Error{Error: msg})
}
