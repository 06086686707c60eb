package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composite is the part of action.yml that runAction executes.
type composite struct {
	Inputs map[string]struct {
		Default string `yaml:"default"`
	} `yaml:"inputs"`
	Outputs map[string]struct {
		Value string `yaml:"value"`
	} `yaml:"outputs"`
	Runs struct {
		Using string `yaml:"using"`
		Steps []struct {
			ID    string            `yaml:"id"`
			Shell string            `yaml:"shell"`
			Env   map[string]string `yaml:"env"`
			Run   string            `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"runs"`
}

var expr = regexp.MustCompile(`\$\{\{\s*([a-z]+)\.([a-z-]+)(?:\.outputs\.([a-z-]+))?\s*\}\}`)

// runAction runs the repository's composite action as a runner does: each step's
// script under bash -eo pipefail with its env, inputs.* and steps.*.outputs.*
// substituted, and GITHUB_OUTPUT and GITHUB_PATH files. It returns the action's
// outputs and the exit status of the step that failed, if one did.
func runAction(t *testing.T, inputs map[string]string) (map[string]string, int) {
	t.Helper()
	b, err := os.ReadFile("../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a composite
	if err := yaml.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.Runs.Using != "composite" {
		t.Fatalf("action.yml runs %q", a.Runs.Using)
	}
	in := map[string]string{}
	for k, v := range a.Inputs {
		in[k] = v.Default
	}
	for k, v := range inputs {
		if _, ok := a.Inputs[k]; !ok {
			t.Fatalf("action.yml has no input %q", k)
		}
		in[k] = v
	}
	stepOut := map[string]map[string]string{}
	subst := func(s string) string {
		return expr.ReplaceAllStringFunc(s, func(m string) string {
			p := expr.FindStringSubmatch(m)
			switch {
			case p[1] == "inputs":
				return in[p[2]]
			case p[1] == "steps" && p[3] != "":
				return stepOut[p[2]][p[3]]
			}
			t.Fatalf("expression %s: not emulated", m)
			return ""
		})
	}
	dir := t.TempDir()
	path := filepath.Dir(binPath) + ":" + os.Getenv("PATH")
	for i, st := range a.Runs.Steps {
		if st.Shell != "bash" {
			t.Fatalf("step %d: shell %q", i, st.Shell)
		}
		outFile := filepath.Join(dir, fmt.Sprintf("output-%d", i))
		os.WriteFile(outFile, nil, 0o600)
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", subst(st.Run))
		cmd.Env = append(os.Environ(), "PATH="+path, "GITHUB_OUTPUT="+outFile, "GITHUB_PATH="+filepath.Join(dir, "path"))
		for k, v := range st.Env {
			cmd.Env = append(cmd.Env, k+"="+subst(v))
		}
		out, err := cmd.CombinedOutput()
		t.Logf("step %d (%s):\n%s", i, st.ID, out)
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		kv, _ := os.ReadFile(outFile)
		stepOut[st.ID] = map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(kv)), "\n") {
			if k, v, ok := strings.Cut(l, "="); ok {
				stepOut[st.ID][k] = v
			}
		}
	}
	outs := map[string]string{}
	for k, o := range a.Outputs {
		outs[k] = subst(o.Value)
	}
	return outs, 0
}

// TestGitHubAction runs action.yml's steps, as a runner would, against a real
// server reached over its TCP admin listener.
func TestGitHubAction(t *testing.T) {
	// Its own server and state directory: it runs beside the others like it.
	t.Parallel()
	admin := freeAddr(t)
	const token = "action-token-0123456789abcdef"
	s := startServer(t, newStateDir(t), "--admin-listen", admin, "--admin-token", token)
	s.seedSQL("app", "CREATE TABLE t (i int);")
	in := map[string]string{"name": "pr-7", "admin-url": "http://" + admin, "admin-token": token}
	out, code := runAction(t, in)
	if code != 0 || out["created"] != "true" || out["url"] != "postgres://postgres@"+s.addr+"/app%40pr-7" ||
		!strings.HasSuffix(out["libpq"], " dbname=app@pr-7") || !strings.HasPrefix(out["jdbc"], "jdbc:postgresql://") {
		t.Fatalf("create: exit %d, outputs %v", code, out)
	}
	if b := s.branches()["pr-7"]; b.TTL != "72h0m0s" {
		t.Errorf("ttl %q, want the action's default 72h", b.TTL)
	}
	if res, err := exec.Command("psql", "-X", "-At", out["url"]+"?sslmode=disable", "-c", "INSERT INTO t VALUES (1)").CombinedOutput(); err != nil {
		t.Fatalf("psql on the url output: %v: %s", err, res)
	}
	if out, code = runAction(t, in); code != 0 || out["created"] != "false" {
		t.Errorf("second create: exit %d, outputs %v", code, out)
	}
	// A preview app holds a session: reset fails, and with force ends it.
	app := s.connect(t, "app@pr-7")
	in["command"] = "reset"
	if _, code = runAction(t, in); code != 1 {
		t.Errorf("reset with a session open: exit %d, want 1", code)
	}
	in["force"] = "yes"
	if _, code = runAction(t, in); code != 2 {
		t.Errorf("force: yes: exit %d, want 2", code)
	}
	in["force"] = "true"
	if _, code = runAction(t, in); code != 0 {
		t.Errorf("reset with force: exit %d", code)
	}
	if _, err := app.Exec(context.Background(), "SELECT 1"); pgCode(err) != "57P01" {
		t.Errorf("the preview app's session after reset with force: %v, want SQLSTATE 57P01", err)
	}
	if got, err := s.psql(t, "app@pr-7", "SELECT count(*) FROM t"); err != nil || got != "0" {
		t.Errorf("after reset: %q %v", got, err)
	}
	app = s.connect(t, "app@pr-7")
	in["command"] = "destroy"
	for range 2 {
		if _, code = runAction(t, in); code != 0 {
			t.Errorf("destroy: exit %d", code)
		}
	}
	app.Close(context.Background())
	if _, ok := s.branches()["pr-7"]; ok {
		t.Error("pr-7 left after destroy")
	}
	in["command"] = "rename"
	if _, code = runAction(t, in); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
}
