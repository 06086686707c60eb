package sim

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/internal/testbuild"
)

var (
	binPath  string // the pgbranchproxy binary under test
	shimPath string // liblazyrw.so
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("sim: skipped with -short")
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "the simulation needs root (network namespaces, OverlayFS mounts, Postgres as another user); run it as root or with -short")
		os.Exit(1)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		fmt.Fprintln(os.Stderr, "the simulation needs iproute2's ip (make deps installs it)")
		os.Exit(1)
	}
	for _, msg := range sweepLeftovers() {
		fmt.Fprintln(os.Stderr, "sim: leftover of an earlier run:", msg)
	}
	dir, err := os.MkdirTemp("", runPrefix()+"bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Chmod(dir, 0o755)
	code := 1
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// build builds the binary and the shim into dir.
func build(dir string) (err error) {
	if binPath, err = testbuild.Binary(dir, false); err != nil {
		return err
	}
	shimPath, err = testbuild.Shim(dir)
	return err
}
