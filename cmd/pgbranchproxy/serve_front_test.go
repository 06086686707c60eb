package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
	"github.com/pgbranchproxy/pgbranchproxy/branches"
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/proxy"
	"go.uber.org/zap"
)

// TestFrontAdminSocket: a front takes its state directory's lock, so that it
// is refused a directory a node (or another front) holds; without a directory
// it can make, it serves without an admin socket.
func TestFrontAdminSocket(t *testing.T) {
	dir := t.TempDir()
	sock, unlock, err := frontAdminSocket(dir, zap.NewNop())
	if err != nil || sock != filepath.Join(dir, "admin.sock") {
		t.Fatalf("a free directory: %q %v", sock, err)
	}
	if _, _, err := frontAdminSocket(dir, zap.NewNop()); !errors.Is(err, branches.ErrStateDirInUse) {
		t.Fatalf("a held directory: %v, want ErrStateDirInUse", err)
	}
	unlock()
	sock, _, err = frontAdminSocket("/proc/no-such-dir", zap.NewNop())
	if err != nil || sock != "" {
		t.Fatalf("a directory that cannot be made: %q %v, want no socket and no error", sock, err)
	}
}

// TestFrontRefusesHolds: a warm-pool hold is one node's, so a front refuses it
// (501) rather than pass it to a node at random; pgbranchtest.Warm then sets the
// source's warm setting instead.
func TestFrontRefusesHolds(t *testing.T) {
	fw := &nodeForwarder{}
	for _, pattern := range []string{"POST /v1/sources/{name}/holds", "DELETE /v1/sources/{name}/holds/{id}"} {
		rec := httptest.NewRecorder()
		fw.forward(admin.Route{Pattern: pattern})(rec, httptest.NewRequest(http.MethodPost, "/v1/sources/app/holds", nil))
		if rec.Code != http.StatusNotImplemented {
			t.Errorf("%s through a front: %d, want 501", pattern, rec.Code)
		}
	}
}

// TestFrontAnswersNodesAndInfo: through a front, node ls marks no node as
// "this server" (node drain without an id would drain whichever node answered),
// and info names the caller's role, as a node's does, so that info with a ci
// token does not ask for /metrics and leave a refusal in the audit log.
func TestFrontAnswersNodesAndInfo(t *testing.T) {
	ctx := context.Background()
	cat, err := catalog.Open(filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Register(ctx, "node-1", "127.0.0.1:7432", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := cat.AddToken(ctx, catalog.Token{Name: "github", Role: admin.RoleCI, Prefix: "pr-", Hash: admin.HashSecret("pgbp_ci-secret")}); err != nil {
		t.Fatal(err)
	}
	fw := &nodeForwarder{cat: cat, stateDir: "/run/front", listen: "127.0.0.1:6432", log: zap.NewNop()}
	api, err := admin.NewFront(cat, nil, "", fw.forward, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, path, token string, into any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s through a front: %d %s", path, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var nodes []branches.NodeInfo
	get(api.Local(), "/v1/nodes", "", &nodes)
	if len(nodes) != 1 || nodes[0].ID != "node-1" || nodes[0].Self {
		t.Fatalf("nodes through a front: %+v, want node-1, not this server", nodes)
	}
	var info struct {
		Listen string `json:"listen"`
		Role   string `json:"role"`
	}
	get(api.Remote(), "/v1/info", "pgbp_ci-secret", &info)
	if info.Listen != "127.0.0.1:6432" || info.Role != admin.RoleCI {
		t.Fatalf("info through a front with a ci token: %+v, want the front's listen and role ci", info)
	}
}

// TestFrontListsAwayBranches: a front's branch ls lists the branches of a node
// that is not serving (its lease ran out) from the catalog, as away, rather
// than leaving them out; a lost one as lost; a role ci caller only its own; and
// a branch live nodes listed is listed once, a stale lost entry giving way.
func TestFrontListsAwayBranches(t *testing.T) {
	ctx := context.Background()
	dsn := filepath.Join(t.TempDir(), "catalog.db")
	cat, err := catalog.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if err := cat.AddSource(ctx, catalog.Source{Name: "app", Kind: "empty"}); err != nil {
		t.Fatal(err)
	}
	live, err := cat.Register(ctx, "node-1", "127.0.0.1:1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := catalog.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	if _, err := gone.Register(ctx, "node-2", "127.0.0.1:2", -time.Second); err != nil {
		t.Fatal(err)
	}
	for _, row := range []struct {
		c    *catalog.Catalog
		name string
	}{{cat, "here"}, {gone, "t1"}, {gone, "pr-2"}} {
		if _, err := row.c.InsertBranch(ctx, catalog.Branch{Source: "app", Name: row.name, State: catalog.Running}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[listKey]int{}
	all := listed(nil, seen, []json.RawMessage{json.RawMessage(`{"name":"here","source":"app","state":"lost"}`)})
	all = listed(all, seen, []json.RawMessage{json.RawMessage(`{"name":"here","source":"app","state":"running"}`),
		json.RawMessage(`{"name":"there","source":"app","state":"lost"}`)})
	all = listed(all, seen, []json.RawMessage{json.RawMessage(`{"name":"there","source":"app","state":"lost"}`)})
	if len(all) != 2 || string(all[0]) != `{"name":"here","source":"app","state":"running"}` {
		t.Fatalf("two nodes' lists: %s, want here (running, not the stale lost entry) and there, once each", all)
	}
	got, err := awayBranches(ctx, cat, []catalog.Node{live}, admin.Caller{Name: "local", Role: admin.RoleAdmin}, seen)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, e := range got {
		var i branches.Info
		if err := json.Unmarshal(e, &i); err != nil {
			t.Fatal(err)
		}
		if i.Node != "node-2" {
			t.Errorf("%s listed with node %q, want node-2", i.Name, i.Node)
		}
		states[i.Name] = i.State
	}
	if len(states) != 2 || states["t1"] != "away" || states["pr-2"] != "away" {
		t.Fatalf("away branches %v, want t1 and pr-2 away (here is node-1's, listed already)", states)
	}
	got, err = awayBranches(ctx, cat, []catalog.Node{live}, admin.Caller{Name: "github", Role: admin.RoleCI, Prefix: "pr-"}, map[listKey]int{})
	if err != nil || len(got) != 1 {
		t.Fatalf("away branches for role ci with prefix pr-: %s %v, want pr-2 alone", got, err)
	}
	if _, err := cat.Janitor(ctx, 0); err != nil {
		t.Fatal(err)
	}
	got, err = awayBranches(ctx, cat, []catalog.Node{live}, admin.Caller{Name: "local", Role: admin.RoleAdmin}, map[listKey]int{{"app", "here"}: 0})
	if err != nil || len(got) != 2 {
		t.Fatalf("after node-2 was declared dead: %s %v", got, err)
	}
	var i branches.Info
	json.Unmarshal(got[0], &i)
	if i.State != "lost" {
		t.Fatalf("a branch of a dead node: %+v, want lost", i)
	}
}

// fakeDrainer's sessions never end by themselves.
type fakeDrainer struct{ shutdownWaited time.Duration }

func (d *fakeDrainer) Drain(ctx context.Context) bool { <-ctx.Done(); return false }

func (d *fakeDrainer) Shutdown(ctx context.Context) {
	start := time.Now()
	<-ctx.Done() // the proxy's Shutdown waits for sessions until ctx ends
	d.shutdownWaited = time.Since(start)
}

// TestFrontStopsAtGrace: a front's stop closes the sessions left once --grace
// has passed; it waited a second grace period for them first.
func TestFrontStopsAtGrace(t *testing.T) {
	d := &fakeDrainer{}
	start := time.Now()
	stopSessions(d, 200*time.Millisecond, zap.NewNop())
	if took := time.Since(start); took > 350*time.Millisecond || d.shutdownWaited > 50*time.Millisecond {
		t.Fatalf("stop took %v, of which %v waiting in Shutdown; want the 200ms grace, then the sessions closed at once", took, d.shutdownWaited)
	}
}

// TestFrontInfoNamesItsSocket: a front's info names its unix socket
// (--unix-socket-dir) and the address it listens on, as a node's does.
func TestFrontInfoNamesItsSocket(t *testing.T) {
	dir := t.TempDir()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	unix, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.6432"))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close()
	fw := &nodeForwarder{stateDir: dir, listen: "127.0.0.1:0", log: zap.NewNop()}
	fw.setClients([]net.Listener{tcp, unix})
	rec := httptest.NewRecorder()
	fw.forward(admin.Route{Pattern: "GET /v1/info"})(rec, httptest.NewRequest(http.MethodGet, "/v1/info", nil))
	var info branches.ServerInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &info); err != nil {
		t.Fatal(err)
	}
	if info.Listen != tcp.Addr().String() || info.UnixSocket != filepath.Join(dir, ".s.PGSQL.6432") {
		t.Fatalf("info %+v, want listen %s and the unix socket", info, tcp.Addr())
	}
}

// TestFrontAdminHint: an admin request a front cannot place (every live node
// draining) says what a client is told, hint included.
func TestFrontAdminHint(t *testing.T) {
	err := fmt.Errorf("place: %w", &proxy.ClientError{Code: "57P03", Message: "no node is available to create the branch",
		Hint: "every live node is draining: resume one (pgbranchproxy node resume), or start another"})
	if got := withHint(err); got != "no node is available to create the branch (every live node is draining: resume one (pgbranchproxy node resume), or start another)" {
		t.Fatalf("withHint = %q", got)
	}
	if got := withHint(errors.New("no node is serving")); got != "no node is serving" {
		t.Fatalf("withHint of a plain error = %q", got)
	}
}
