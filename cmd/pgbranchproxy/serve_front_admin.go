package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/cluster"
	"github.com/pgbranchproxy/pgbranchproxy/front"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"go.uber.org/zap"
)

// A front's admin API passes each request to a node, over the node's peer
// listener with the cluster's mutual TLS: a request about a branch to the node
// that holds it (a new branch to the node a session would put it on), any
// other to a live node.

// nodeForwarder passes a front's admin requests to nodes.
type nodeForwarder struct {
	cat      *catalog.Catalog
	routes   *front.Branches
	member   *cluster.Member // nil: no cluster TLS, and no node serves a front's admin requests
	stateDir string          // the front's, and its --listen (the address it got, once listening), for GET /v1/info
	listen   string
	log      *zap.Logger

	mu         sync.Mutex
	transports map[string]*http.Transport // by node id
	unixSocket string                     // the clients' unix socket (--unix-socket-dir), once listening
}

// setClients records where the front takes clients, once it listens: the
// address --listen got and the unix socket, for GET /v1/info.
func (fw *nodeForwarder) setClients(lns []net.Listener) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for _, ln := range lns {
		switch a := ln.Addr().(type) {
		case *net.TCPAddr:
			fw.listen = a.String()
		case *net.UnixAddr:
			fw.unixSocket = a.Name
		}
	}
}

// info is what GET /v1/info says of the front.
func (fw *nodeForwarder) info() branches.ServerInfo {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return branches.ServerInfo{StateDir: fw.stateDir, Listen: fw.listen, UnixSocket: fw.unixSocket}
}

// forward is the admin.Forward of a front. What it says of itself (GET
// /v1/info: where clients connect, which is the front), the branch list (each
// node lists its own) and the node list (none of them is the front) it answers
// itself.
func (fw *nodeForwarder) forward(rt admin.Route) http.HandlerFunc {
	switch rt.Pattern {
	case "GET /v1/info":
		// The caller's role goes with it, as a node's says it: info asks for
		// /metrics only when the role may read it.
		return func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(struct {
				branches.ServerInfo
				Role string `json:"role,omitempty"`
			}{fw.info(), admin.CallerFrom(r.Context()).Role})
		}
	case "GET /v1/branches":
		return fw.gather
	case "GET /v1/nodes":
		return fw.nodes
	case "POST /v1/sources/{name}/holds", "DELETE /v1/sources/{name}/holds/{id}":
		// A hold deepens one node's pool, in its memory; the pools a front's
		// clients claim from are every node's. pgbranchtest.Warm then sets the
		// source's warm setting instead.
		return func(w http.ResponseWriter, r *http.Request) {
			admin.FrontError(w, http.StatusNotImplemented, "warm-pool holds are a node's own: set the source's warm pool (source set --warm) through a front")
		}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if fw.member == nil {
			admin.FrontError(w, http.StatusNotImplemented, "a front passes admin requests to nodes only with the cluster's mutual TLS (--cluster-dir)")
			return
		}
		node, err := fw.pick(r.Context(), rt, r)
		if err != nil {
			fw.log.Warn("admin request: no node to pass it to", zap.String("path", r.URL.Path), zap.Error(err))
			admin.FrontError(w, http.StatusServiceUnavailable, "no node can take the request now: "+withHint(err))
			return
		}
		target := &url.URL{Scheme: "https", Host: node.PeerAddr}
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				pr.SetURL(target)
				admin.SetCaller(pr.Out, pr.In)
			},
			Transport:     fw.transport(node.ID),
			FlushInterval: -1, // a source build streams its progress
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				fw.log.Warn("admin request: the node did not answer", zap.String("node", node.ID), zap.String("path", r.URL.Path), zap.Error(err))
				admin.FrontError(w, http.StatusBadGateway, fmt.Sprintf("node %s did not answer: %v", node.ID, err))
			},
		}
		rp.ServeHTTP(w, r)
	}
}

// pick chooses the node for a request of route rt.
func (fw *nodeForwarder) pick(ctx context.Context, rt admin.Route, r *http.Request) (catalog.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var id string
	var err error
	switch {
	case rt.Pattern == "POST /v1/branches":
		var body admin.CreateBranch
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(b))
		if json.Unmarshal(b, &body) == nil && body.Name != "" {
			id, err = fw.routes.AdminNode(ctx, body.Source, body.Name, body.From, true)
		}
	case strings.Contains(rt.Pattern, "/v1/branches/{name}"):
		id, err = fw.routes.AdminNode(ctx, r.URL.Query().Get("source"), r.PathValue("name"), "", false)
	}
	if err != nil {
		return catalog.Node{}, err
	}
	live, err := fw.liveNodes(ctx)
	if err != nil {
		return catalog.Node{}, err
	}
	if id == "" {
		return live[rand.IntN(len(live))], nil
	}
	for _, n := range live {
		if n.ID == id {
			return n, nil
		}
	}
	return catalog.Node{}, fmt.Errorf("node %s, which holds the branch, is not serving", id)
}

// liveNodes returns the nodes that serve admin requests now; an error when
// none does.
func (fw *nodeForwarder) liveNodes(ctx context.Context) ([]catalog.Node, error) {
	nodes, err := fw.cat.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	var live []catalog.Node
	for _, n := range nodes {
		if n.LeaseAge < 0 && n.PeerAddr != "" && (n.State == catalog.NodeActive || n.State == catalog.NodeDraining) {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		return nil, fmt.Errorf("no node is serving")
	}
	return live, nil
}

// nodes serves GET /v1/nodes from the catalog: a node would mark itself as
// "this server", which the front is not (and node drain without an id would
// then drain whichever node answered).
func (fw *nodeForwarder) nodes(w http.ResponseWriter, r *http.Request) {
	ns, err := fw.cat.Nodes(r.Context())
	if err != nil {
		admin.FrontError(w, http.StatusServiceUnavailable, err.Error()) // catalog.ErrUnavailable says "catalog unavailable"
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(branches.NodeInfos(ns, "", 0))
}

// gather serves GET /v1/branches: every live node's list, one after the other,
// then the branches of the nodes that are not live, from the catalog. A live
// node that does not answer fails the request (a list that silently missed a
// node's branches would read as those branches being gone).
func (fw *nodeForwarder) gather(w http.ResponseWriter, r *http.Request) {
	if fw.member == nil {
		admin.FrontError(w, http.StatusNotImplemented, "a front passes admin requests to nodes only with the cluster's mutual TLS (--cluster-dir)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	live, err := fw.liveNodes(ctx)
	if err != nil {
		admin.FrontError(w, http.StatusServiceUnavailable, "no node can take the request now: "+withHint(err))
		return
	}
	all := []json.RawMessage{}
	seen := map[listKey]int{}
	for _, n := range live {
		list, status, err := fw.list(ctx, n, r)
		if err != nil {
			admin.FrontError(w, status, fmt.Sprintf("node %s: %v", n.ID, err))
			return
		}
		all = listed(all, seen, list)
	}
	away, err := awayBranches(ctx, fw.cat, live, admin.CallerFrom(r.Context()), seen)
	if err != nil {
		admin.FrontError(w, http.StatusServiceUnavailable, "the branches of the nodes that are not serving: "+err.Error())
		return
	}
	all = append(all, away...)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(all)
}

// list asks node n for its branches as r asks.
func (fw *nodeForwarder) list(ctx context.Context, n catalog.Node, r *http.Request) ([]json.RawMessage, int, error) {
	out := r.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host, out.Host = "https", n.PeerAddr, ""
	admin.SetCaller(out, r)
	resp, err := fw.transport(n.ID).RoundTrip(out)
	if err != nil {
		return nil, http.StatusBadGateway, fmt.Errorf("did not answer: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	var list []json.RawMessage
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &list) != nil {
		var e admin.Error
		json.Unmarshal(body, &e)
		return nil, resp.StatusCode, fmt.Errorf("answered %s: %s", resp.Status, e.Error)
	}
	return list, 0, nil
}

// transport returns the transport to node id's peer listener.
func (fw *nodeForwarder) transport(id string) http.RoundTripper {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if t := fw.transports[id]; t != nil {
		return t
	}
	cfg, err := fw.member.DialConfig(id)
	if err != nil {
		return errTransport{err}
	}
	t := &http.Transport{TLSClientConfig: cfg, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute, TLSHandshakeTimeout: 10 * time.Second,
		ResponseHeaderTimeout: 10 * time.Minute}
	if fw.transports == nil {
		fw.transports = map[string]*http.Transport{}
	}
	fw.transports[id] = t
	return t
}

// close closes the transports' idle connections.
func (fw *nodeForwarder) close() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for _, t := range fw.transports {
		t.CloseIdleConnections()
	}
}

// errTransport fails every request with err.
type errTransport struct{ err error }

func (t errTransport) RoundTrip(*http.Request) (*http.Response, error) { return nil, t.err }

// withHint is err's text, with the hint a client would get beside it (every
// live node draining, what to do about it), which an admin caller needs as
// much.
func withHint(err error) string {
	var ce *proxy.ClientError
	if errors.As(err, &ce) && ce.Hint != "" {
		return ce.Message + " (" + ce.Hint + ")"
	}
	return err.Error()
}
