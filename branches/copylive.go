package branches

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// copyLive copies src into dst as copyTree does, from a directory a running server
// keeps changing: a file or directory that goes between cp listing it and copying
// it (a WAL segment a checkpoint recycled, a temporary or dropped relation's file,
// a replication slot dropped) is left out instead of failing the copy. Only a
// backup whose WAL is replayed may be copied this way.
func copyLive(ctx context.Context, src, dst string) error {
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "cp", "-a", "--reflink=auto", src+"/.", dst)
	cmd.Env = append(os.Environ(), "LC_ALL=C") // the messages onlyVanished reads
	out, err := cmd.CombinedOutput()
	if err != nil && (ctx.Err() != nil || !onlyVanished(string(out), src)) {
		return fmt.Errorf("copy branch layer: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// onlyVanished reports whether every line of cp's output, copying src, says that
// a source file or directory did not exist when cp came to it. Of a directory
// that goes after cp made its copy, cp also fails to read the attributes: that
// line names the source path alone.
func onlyVanished(out, src string) bool {
	out = strings.TrimSpace(out)
	if out == "" {
		return false
	}
	for _, line := range strings.Split(out, "\n") {
		source := strings.HasPrefix(line, "cp: cannot stat ") || strings.HasPrefix(line, "cp: cannot access ") ||
			(strings.HasPrefix(line, "cp: cannot open ") && strings.Contains(line, "' for reading: ")) ||
			strings.HasPrefix(line, "cp: '"+src+"/./")
		if !source || !strings.HasSuffix(line, ": No such file or directory") {
			return false
		}
	}
	return true
}

// removeCopiedSlots removes from the copy dst of a running server's directory
// the replication slots no copy may start with: the temporary ones of online
// copies (this one's and those of others taken at once), and a slot's directory
// that cp copied without its state file because the slot was dropped meanwhile,
// on which Postgres does not start (PANIC: could not open file
// "pg_replslot/.../state"). Other slots, and whiteouts, stay as the parent has
// them.
func removeCopiedSlots(dst string) {
	dir := filepath.Join(dst, "pg_replslot")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), copySlotPrefix) {
			os.RemoveAll(p)
		} else if _, err := os.Lstat(filepath.Join(p, "state")); e.IsDir() && os.IsNotExist(err) {
			os.RemoveAll(p)
		}
	}
}
