package integration

import (
	"strings"
	"testing"
)

// TestServerExitDuringOperation kills a branch's postmaster while an operation on
// the branch is still in flight (its creation, once the running state is
// recorded). The exit must be recorded once the operation ends, and the next
// session must get a freshly started server, never the dead socket.
func TestServerExitDuringOperation(t *testing.T) {
	t.Setenv(failpointsEnv, "catalog.running@victim=1*kill")
	s := startServer(t, newStateDir(t), "--reap-interval", "200ms")
	s.seedSQL("app", lifecycleSQL)
	for i := 0; i < 3; i++ {
		out, err := s.psql(t, "app@victim", "SELECT count(*) FROM t")
		if err != nil || out != "1000" {
			t.Fatalf("session %d on a branch whose server died during its creation: %q %v\n%s", i, out, err, s.logs())
		}
	}
	if !strings.Contains(s.logs(), "branch server exited unexpectedly") {
		t.Errorf("the server's exit was not recorded:\n%s", s.logs())
	}
	if b := s.branches()["victim"]; b.State != "running" || len(postmastersWithPID(s.state, b.PID)) != 1 {
		t.Errorf("branch after the exit was repaired: %+v", b)
	}
	s.stop()
}
