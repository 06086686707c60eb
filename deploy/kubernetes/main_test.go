package kubernetes_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/internal/testbuild"
)

var (
	binPath       string               // pgbranchproxy built from this tree
	serveFlagsSet map[string]serveFlag // what its serve --help lists
)

// TestMain builds the pgbranchproxy binary of this tree once and reads the flags
// of its serve command, which the manifests' args are checked against.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pgbranch-k8s-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	code := runTests(m, dir)
	os.RemoveAll(dir)
	os.Exit(code)
}

func runTests(m *testing.M, dir string) int {
	var err error
	if binPath, err = testbuild.Binary(dir, false); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	help, err := exec.Command(binPath, "serve", "--help").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgbranchproxy serve --help: %v\n", err)
		return 1
	}
	serveFlagsSet = parseHelp(string(help))
	return m.Run()
}
