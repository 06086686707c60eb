package admin

import (
	"fmt"
	"net/http"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
)

// hostPath reports whether a new source would be read from a path of the
// server's host (an SQL file, a data directory, a dump, a unix socket), and which.
// The server reads it as root, or connects to it as its --pg-user: only the admin
// socket, whose caller is root, may name one. A token over --admin-listen, of any
// role, would otherwise read any file of the host (psql's error quotes the first
// line of it that it cannot run), copy any directory, and copy any cluster of the
// host that trusts the --pg-user over its socket (peer authentication).
func hostPath(req branches.SourceRequest) (string, bool) {
	switch req.Kind {
	case seed.KindSQL:
		return req.SQLFile, true
	case seed.KindDataDir:
		return req.DataDir, true
	case seed.KindDump:
		return req.DumpPath, true
	case seed.KindURL:
		return seed.LocalConn(req.URL)
	}
	return "", false
}

// refuseHostPath answers a request of c for a source read from path of the
// server's host, when c is not the admin socket's caller, with 403; it reports
// whether it did.
func refuseHostPath(w http.ResponseWriter, c Caller, path string, onHost bool) bool {
	if !onHost || c.Name == LocalActor {
		return false
	}
	msg := fmt.Sprintf("%s may not add a source read from a path of the server's host (%q): "+
		"the server reads it as root, or connects to it as its --pg-user; add it on the server (its admin socket), or seed from a URL of a server over the network, or from a branch", c, path)
	noteError(w, http.StatusForbidden, msg)
	writeJSON(w, http.StatusForbidden, Error{Error: msg})
	return true
}
