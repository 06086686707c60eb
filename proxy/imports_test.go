package proxy_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The front door links none of the branch engine: not its lifecycle, catalog
// drivers or storage (package errs holds the errors it maps, roles the role sets
// it authenticates with).
func TestImportsNoEngine(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/pgbranchproxy/pgbranchproxy/branches/errs":  true,
		"github.com/pgbranchproxy/pgbranchproxy/branches/roles": true,
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/pgbranchproxy/pgbranchproxy/branches") && !allowed[p] {
			t.Errorf("proxy links %s", p)
		}
		if strings.HasPrefix(p, "modernc.org/sqlite") {
			t.Errorf("proxy links SQLite (%s)", p)
		}
	}
}
