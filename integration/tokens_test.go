package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/admin"
)

// adminCall does one request on --admin-listen with a bearer token ("" for none)
// and returns its status and body.
func adminCall(t *testing.T, addr, token, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// waitNoSessions waits until the proxy has seen the sessions of branch end, which
// it does a moment after their clients close them.
func waitNoSessions(t *testing.T, s *server, branch string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.branches()[branch].Sessions > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("branch %s still has sessions 10s after its clients closed them", branch)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAdminTokens(t *testing.T) {
	addr := freeAddr(t)
	bootstrap := "a-long-enough-admin-token"
	s := startServer(t, newStateDir(t), "--admin-listen", addr, "--admin-token", bootstrap)
	s.mustCLI("source", "add", "blank", "--empty")
	ci := strings.TrimSpace(s.mustCLI("token", "create", "github", "--role", "ci", "--prefix", "pr-"))
	read := strings.TrimSpace(s.mustCLI("token", "create", "grafana", "--role", "read"))
	if !strings.HasPrefix(ci, admin.TokenPrefix) || !strings.HasPrefix(read, admin.TokenPrefix) || ci == read {
		t.Fatalf("token create printed %q and %q", ci, read)
	}
	expect := func(token, method, path, body string, want int) string {
		t.Helper()
		code, out := adminCall(t, addr, token, method, path, body)
		if code != want {
			t.Errorf("%s %s %s: %d %s, want %d\nserver log:\n%s", method, path, body, code, out, want, s.logs())
		}
		return out
	}
	expect(bootstrap, "POST", "/v1/branches", `{"name":"main"}`, 200)
	expect(bootstrap, "POST", "/v1/branches", `{"name":"qa-1"}`, 200)

	t.Run("ci token keeps to its prefix", func(t *testing.T) {
		expect(ci, "POST", "/v1/branches", `{"name":"pr-1"}`, 200)
		c := s.connect(t, "postgres@pr-1")
		if _, err := c.Exec(t.Context(), "CREATE TABLE pr_work (id int)"); err != nil {
			t.Fatal(err)
		}
		c.Close(t.Context())
		waitNoSessions(t, s, "pr-1")
		expect(ci, "POST", "/v1/branches/pr-1/reset", "", 200)
		if out, err := s.psql(t, "postgres@pr-1", "SELECT count(*) FROM pg_class WHERE relname = 'pr_work'"); err != nil || out != "0" {
			t.Errorf("after reset by the ci token: %q %v", out, err)
		}
		expect(ci, "POST", "/v1/branches", `{"name":"main"}`, 403)
		expect(ci, "POST", "/v1/branches/main/reset", "", 403)
		expect(ci, "DELETE", "/v1/branches/main", "", 403)
		expect(ci, "DELETE", "/v1/branches/qa-1", "", 403)
		expect(ci, "POST", "/v1/branches", `{"name":"qa-2"}`, 403)
		expect(ci, "POST", "/v1/branches", `{"name":"pr-2","from":"main"}`, 403)
		expect(ci, "POST", "/v1/branches/pr-1/stop", "", 403)
		expect(ci, "DELETE", "/v1/sources/blank", "", 403)
		expect(ci, "POST", "/v1/tokens", `{"name":"mine","role":"admin"}`, 403)
		var listed []struct{ Name string }
		json.Unmarshal([]byte(expect(ci, "GET", "/v1/branches", "", 200)), &listed)
		if len(listed) != 1 || listed[0].Name != "pr-1" {
			t.Errorf("ci token lists %+v, want only pr-1", listed)
		}
		waitNoSessions(t, s, "pr-1")
		expect(ci, "DELETE", "/v1/branches/pr-1", "", 200)
		b := s.branches()
		if _, ok := b["pr-1"]; ok {
			t.Error("pr-1 survived its destroy")
		}
		if _, ok := b["main"]; !ok {
			t.Error("main is gone")
		}
		if _, ok := b["qa-1"]; !ok {
			t.Error("qa-1 is gone")
		}
	})

	t.Run("info with a ci token", func(t *testing.T) {
		// info reads the relay's figures from /metrics only for roles that may:
		// a ci token's info leaves no refusal in the audit log.
		out, errOut, code := s.cliCode("--admin-url", "http://"+addr, "--admin-token", ci, "info")
		if code != 0 || !strings.Contains(out, `"listen"`) || strings.Contains(out, `"relay"`) {
			t.Errorf("info with a ci token: exit %d\n%s%s", code, out, errOut)
		}
		if out, _, _ := s.cliCode("--admin-url", "http://"+addr, "--admin-token", read, "info"); !strings.Contains(out, `"relay"`) {
			t.Errorf("info with a read token lacks the relay:\n%s", out)
		}
	})

	t.Run("read token reads only", func(t *testing.T) {
		expect(read, "GET", "/v1/branches", "", 200)
		expect(read, "GET", "/v1/info", "", 200)
		expect(read, "GET", "/metrics", "", 200)
		expect(read, "POST", "/v1/branches", `{"name":"r-1"}`, 403)
		expect(read, "POST", "/v1/branches/main/reset", "", 403)
		expect(read, "DELETE", "/v1/branches/main", "", 403)
		expect(read, "GET", "/v1/tokens", "", 403)
	})

	t.Run("wrong or missing token", func(t *testing.T) {
		expect("", "GET", "/v1/branches", "", 401)
		expect("pgbp_not-a-token", "GET", "/v1/branches", "", 401)
		expect(ci+"x", "DELETE", "/v1/branches/pr-1", "", 401)
		expect("", "GET", "/healthz", "", 200)
	})

	t.Run("CLI over --admin-url with the ci token", func(t *testing.T) {
		remote := func(args ...string) (string, error) {
			return s.cli(append([]string{"--admin-url", "http://" + addr, "--admin-token", ci}, args...)...)
		}
		out, err := remote("branch", "create", "pr-5", "--if-not-exists", "--output", "env")
		if err != nil || !strings.Contains(out, "PGBRANCH_BRANCH=pr-5\nPGBRANCH_SOURCE=blank\nPGBRANCH_CREATED=true\n") {
			t.Errorf("branch create --output env with the ci token: %v\n%s", err, out)
		}
		if out, err := remote("branch", "reset", "main"); err == nil || !strings.Contains(out, "may not branch.reset branch main") {
			t.Errorf("branch reset main with the ci token: %v\n%s", err, out)
		}
		if out, err := remote("branch", "destroy", "pr-5"); err != nil {
			t.Errorf("branch destroy pr-5 with the ci token: %v\n%s", err, out)
		}
	})

	t.Run("revoked token stops at once", func(t *testing.T) {
		expect(ci, "GET", "/v1/branches", "", 200)
		s.mustCLI("token", "rm", "github")
		expect(ci, "GET", "/v1/branches", "", 401)
		expect(ci, "POST", "/v1/branches", `{"name":"pr-9"}`, 401)
		if out := s.mustCLI("token", "ls"); strings.Contains(out, "github") || !strings.Contains(out, "grafana") || !strings.Contains(out, "bootstrap") {
			t.Errorf("token ls after rm:\n%s", out)
		}
	})

	t.Run("audit log", func(t *testing.T) {
		var entries []admin.AuditEntry
		if err := json.Unmarshal([]byte(s.mustCLI("audit", "ls", "--json", "--since", "1h")), &entries); err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, e := range entries {
			result, _, _ := strings.Cut(e.Result, " ")
			have[strings.Join([]string{e.Actor, e.Action, e.Target, result}, " ")] = true
		}
		for _, want := range []string{
			"local source.add blank ok",
			"local token.create github ok",
			"bootstrap branch.create main ok",
			"github branch.create pr-1 ok",
			"github branch.reset pr-1 ok",
			"github branch.destroy pr-1 ok",
			"github branch.reset main 403",
			"github branch.destroy main 403",
			"github branch.create main 403",
			"github branch.create qa-2 403",
			"github branch.create pr-5 ok",
			"github branch.reset main 403",
			"github branch.destroy pr-5 ok",
			"grafana branch.reset main 403",
			"local token.remove github ok",
		} {
			if !have[want] {
				t.Errorf("audit log lacks %q; it has:\n%s", want, s.mustCLI("audit", "ls"))
			}
		}
		for _, e := range entries {
			if e.Actor == "" || e.Action == "GET /v1/branches" && e.Result == "ok" || strings.Contains(e.Action, "/metrics") {
				t.Errorf("entry %+v should not be there", e)
			}
		}
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		if out := strings.TrimSpace(s.mustCLI("audit", "ls", "--since", future)); out != "TIME  ACTOR  ACTION  TARGET  RESULT" {
			t.Errorf("audit ls --since an hour ahead:\n%s", out)
		}
	})
}
