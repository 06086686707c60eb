package branches

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// copyLive copies src into dst as copyTree does, from a directory a running server
// keeps changing: a file or directory that goes between cp listing it and copying
// it (a WAL segment a checkpoint recycled, a temporary or dropped relation's file)
// is left out instead of failing the copy. Only a backup whose WAL is replayed may
// be copied this way.
func copyLive(ctx context.Context, src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", src+"/.", dst)
	cmd.Env = append(os.Environ(), "LC_ALL=C") // the messages onlyVanished reads
	out, err := cmd.CombinedOutput()
	if err != nil && (ctx.Err() != nil || !onlyVanished(string(out))) {
		return fmt.Errorf("copy branch layer: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// onlyVanished reports whether every line of cp's output says that a source file
// or directory did not exist when cp came to it.
func onlyVanished(out string) bool {
	out = strings.TrimSpace(out)
	if out == "" {
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		source := strings.HasPrefix(line, "cp: cannot stat ") || strings.HasPrefix(line, "cp: cannot access ") ||
			(strings.HasPrefix(line, "cp: cannot open ") && strings.Contains(line, "' for reading: "))
		if !source || !strings.HasSuffix(line, ": No such file or directory") {
			return false
		}
	}
	return true
}
