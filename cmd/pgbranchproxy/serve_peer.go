package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/cluster"
	"github.com/pgbranchproxy/pgbranchproxy/peer"
	"go.uber.org/zap"
)

// A node serves its seeds to the other nodes on a peer listener (package peer),
// and the admin API to fronts (peerHandler): with the cluster's mutual TLS, or,
// seeds only, plain on loopback or a trusted network.

// peerListenAddr is where a node's peer listener listens: --peer-listen, or
// the --listen host on a port the system picks.
func peerListenAddr(f *serveFlags) (string, error) {
	if f.peerListen != "" {
		return f.peerListen, nil
	}
	host, _, err := net.SplitHostPort(f.listen)
	if err != nil {
		return "", fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	return net.JoinHostPort(host, "0"), nil
}

// checkPeerListen refuses a plain peer listener that others than nodes could
// reach: it hands out whole databases.
func checkPeerListen(f *serveFlags, addr string, mtls bool) error {
	if mtls || f.insecureTrust || loopbackListen(addr) {
		return nil
	}
	return fmt.Errorf("a peer listener on %s without --cluster-dir would give seeds to anyone who reaches it: give the node the cluster's certificates, listen on loopback, or pass --insecure-trust", addr)
}

// nodeSeedFetcher returns how a node fetches seeds from the others: over the
// cluster's mutual TLS when it has certificates; nil for a single server.
func nodeSeedFetcher(f *serveFlags, member *cluster.Member) branches.SeedFetcher {
	switch {
	case f.role != roleNode:
		return nil
	case member == nil:
		return &peer.Client{}
	}
	return &peer.Client{TLS: func(node string) (*tls.Config, error) { return member.PeerDialConfig(node) }}
}

// startPeer starts the node's peer listener, serving mgr's seeds to the other
// nodes and api to fronts, and records its address (the advertised host, the
// port it listens on) for the other nodes and the fronts. stop closes it.
func startPeer(f *serveFlags, member *cluster.Member, mgr *branches.Manager, api *admin.API, log *zap.Logger) (stop func(), err error) {
	addr, err := peerListenAddr(f)
	if err != nil {
		return nil, err
	}
	if err := checkPeerListen(f, addr, member != nil); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--peer-listen: %w", err)
	}
	srv := &http.Server{Handler: peerHandler(peer.Handler(mgr, log), api), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: zap.NewStdLog(log.WithOptions(zap.IncreaseLevel(zap.InfoLevel)))} // failed handshakes
	if member != nil {
		cfg, err := member.PeerListenerConfig()
		if err != nil {
			ln.Close()
			return nil, err
		}
		ln = tls.NewListener(ln, cfg)
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("peer listener stopped", zap.Error(err))
		}
	}()
	advertised, err := peerAdvertise(f, ln.Addr())
	if err != nil {
		srv.Close()
		return nil, err
	}
	mgr.SetPeerAddr(advertised)
	log.Info("peer listener", zap.String("listen", ln.Addr().String()), zap.String("advertise", advertised), zap.Bool("mtls", member != nil))
	return func() { srv.Close() }, nil
}

// peerAdvertise is the peer listener's address for the other nodes: the host
// fronts reach this node at, and the port the listener got.
func peerAdvertise(f *serveFlags, got net.Addr) (string, error) {
	at := cmpOr(f.advertise, f.listen)
	if f.peerListen != "" && !unspecifiedHost(f.peerListen) {
		at = f.peerListen // listening on one address: that one
	}
	host, _, err := net.SplitHostPort(at)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(got.(*net.TCPAddr).Port)), nil
}

// peerHandler serves seeds to nodes and the admin API to fronts. Over the
// cluster's mutual TLS each is served only to its role; a plain listener (no
// cluster certificates) serves seeds, as it always has, and no admin request.
func peerHandler(seeds http.Handler, api *admin.API) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/seeds/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			if role, name, err := cluster.Peer(*r.TLS); err != nil || role != cluster.RoleNode {
				http.Error(w, fmt.Sprintf("seeds are for nodes, not the %s %q", role, name), http.StatusForbidden)
				return
			}
		}
		seeds.ServeHTTP(w, r)
	}))
	mux.Handle("/", api.Forwarded(frontOf))
	return mux
}

// frontOf returns the name of the front a request over the cluster's mutual
// TLS comes from, if it does.
func frontOf(r *http.Request) (string, bool) {
	if r.TLS == nil {
		return "", false
	}
	role, name, err := cluster.Peer(*r.TLS)
	return name, err == nil && role == cluster.RoleFront
}
