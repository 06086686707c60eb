package seed

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
)

var walSegmentName = regexp.MustCompile(`^[0-9A-F]{24}$`)

// trimWAL keeps only the WAL segment holding the shutdown checkpoint's redo point and
// punches its all-zero tail into a hole. The file's bytes do not change: only pages
// that read as zeros become unallocated.
func (b *Builder) trimWAL(ctx context.Context, dir, version string) error {
	cmd, err := b.rt.Command(ctx, version, "pg_controldata", "-D", dir)
	if err != nil {
		return err
	}
	cmd.Env = append(cmd.Env, "LC_ALL=C")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("pg_controldata: %w", err)
	}
	fields := controlFields(out)
	if st := fields["Database cluster state"]; st != "shut down" {
		return fmt.Errorf("%w (state %q)", errNotShutDown, st)
	}
	keep := fields["Latest checkpoint's REDO WAL file"]
	if !walSegmentName.MatchString(keep) {
		return fmt.Errorf("pg_controldata gave no REDO WAL file (%q)", keep)
	}
	walDir := filepath.Join(dir, "pg_wal")
	entries, err := os.ReadDir(walDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if walSegmentName.MatchString(e.Name()) && e.Name() != keep {
			if err := os.Remove(filepath.Join(walDir, e.Name())); err != nil {
				return err
			}
		}
	}
	status, _ := os.ReadDir(filepath.Join(walDir, "archive_status"))
	for _, e := range status {
		os.Remove(filepath.Join(walDir, "archive_status", e.Name()))
	}
	return punchZeroTail(filepath.Join(walDir, keep))
}

// punchZeroTail turns everything after the last page holding a non-zero byte into a hole.
func punchZeroTail(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	const page = 8192
	buf := make([]byte, page)
	var end int64 // offset just past the last page with data
	for off := int64(0); off < st.Size(); off += page {
		n, err := f.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			return err
		}
		if !allZero(buf[:n]) {
			end = off + page
		}
	}
	if end >= st.Size() {
		return nil
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, end, st.Size()-end); err != nil {
		return fmt.Errorf("punch hole in %s: %w", filepath.Base(path), err)
	}
	return f.Sync()
}

func allZero(b []byte) bool {
	return len(bytes.Trim(b, "\x00")) == 0
}

func controlFields(out []byte) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// cleanRuntimeFiles removes what a stopped server leaves that branches should not inherit.
func cleanRuntimeFiles(dir string) {
	os.Remove(filepath.Join(dir, "postmaster.opts"))
	for _, d := range []string{"pg_stat_tmp"} {
		entries, _ := os.ReadDir(filepath.Join(dir, d))
		for _, e := range entries {
			os.RemoveAll(filepath.Join(dir, d, e.Name()))
		}
	}
}
