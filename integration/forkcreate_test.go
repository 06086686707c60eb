package integration

import (
	"encoding/json"
	"errors"
	"os/exec"
	"testing"
)

// TestCreateFromParentsSource: with several sources, branch create --from PARENT
// (no --source) makes the branch in the source of the only branch named PARENT,
// as a fork must be, and a parent no source has is still "not found" (exit 3).
func TestCreateFromParentsSource(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("shop", shopSQL)
	s.seedSQL("crm", "CREATE TABLE leads (id int);")
	if _, err := s.psql(t, "crm@agent", "INSERT INTO leads VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, s, "agent")
	var res struct{ Source string }
	if err := json.Unmarshal([]byte(s.mustCLI("branch", "create", "agent-1", "--from", "agent", "--output", "json")), &res); err != nil || res.Source != "crm" {
		t.Fatalf("branch create --from agent: source %q (%v), want crm", res.Source, err)
	}
	if out, err := s.psql(t, "crm@agent-1", "SELECT id FROM leads"); err != nil || out != "7" {
		t.Errorf("the fork reads %q (%v), want its parent's 7", out, err)
	}
	if b := s.branches()["agent-1"]; b.Parent != "agent" {
		t.Errorf("agent-1's parent: %q", b.Parent)
	}
	out, err := s.cli("branch", "create", "orphan", "--from", "nosuch")
	if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Errorf("branch create --from a missing parent: %v, want exit 3\n%s", err, out)
	}
}
