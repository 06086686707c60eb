package integration

import (
	"os"
	"strings"
	"testing"
)

// TestCLIWhenServeDies: a branch command whose serve dies before answering says
// that, and that the command may or may not have taken effect, rather than Go's
// `Post "http://pgbranchproxy/v1/branches/r/reset": EOF`. The next start finishes
// the reset.
func TestCLIWhenServeDies(t *testing.T) {
	t.Setenv(failpointsEnv, "catalog.resetting@r=1*crash")
	s := startServer(t, newStateDir(t))
	s.seedSQL("app", lifecycleSQL)
	mustWrite(t, s, "r", "before")
	out, err := s.cli("branch", "reset", "r")
	waitExit(t, s)
	if err == nil || !strings.Contains(out, "the server closed the connection before answering") ||
		!strings.Contains(out, "may or may not have taken effect") || strings.Contains(out, "EOF") {
		t.Errorf("branch reset while serve died: %v\n%s", err, out)
	}
	os.Setenv(failpointsEnv, "")
	s.start()
	mustRead(t, s, "r", "seed")
}
