// Package testbuild builds, for tests that run the real programs, the
// pgbranchproxy binary and the lazyrw shim of this source tree.
package testbuild

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
)

// root is the module's directory: two levels above this file.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Binary builds pgbranchproxy into dir (with the race detector if race) and
// returns its path.
func Binary(dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "pgbranchproxy")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/pgbranchproxy")...)
	cmd.Dir = root()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build pgbranchproxy: %v\n%s", err, out)
	}
	return bin, nil
}

// Shim builds liblazyrw.so and copies it into dir, returning its path.
func Shim(dir string) (string, error) {
	shim := filepath.Join(dir, "liblazyrw.so")
	for _, c := range [][]string{
		{"make", "-s", "-C", "shim", "all"},
		{"cp", "shim/liblazyrw.so", shim},
	} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = root()
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("%v: %v\n%s", c, err, out)
		}
	}
	return shim, nil
}
