package dbdiff

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Unified returns the unified diff (diff -u) of two texts labelled aName and bName,
// or "" when they are equal.
func Unified(ctx context.Context, aName, bName, a, b string) (string, error) {
	if a == b {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "pgbranch-diff-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.WriteFile(pa, []byte(a), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(pb, []byte(b), 0o600); err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "diff", "-u", "--label", aName, "--label", bName, pa, pb)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return string(out), nil
	}
	return "", fmt.Errorf("diff: %v: %s", err, bytes.TrimSpace(stderr.Bytes()))
}
