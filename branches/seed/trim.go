package seed

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"golang.org/x/sys/unix"
)

var walSegmentName = regexp.MustCompile(`^[0-9A-F]{24}$`)

// IsWALSegment reports whether name is a WAL segment file's name.
func IsWALSegment(name string) bool { return walSegmentName.MatchString(name) }

// trimWAL keeps only the WAL segment holding the shutdown checkpoint's redo point and
// turns everything after the WAL page that ends the checkpoint record into a hole.
// After a clean shutdown that record is the last one: what follows is zeros (a new
// segment) or stale bytes of a recycled segment (a copied data directory), and
// recovery stops at either, so a hole there changes nothing Postgres reads as WAL.
func (b *Builder) trimWAL(ctx context.Context, dir, version, image string) error {
	var out bytes.Buffer
	if err := b.rt.Run(ctx, runtime.Job{Version: version, Image: image, Prog: "pg_controldata", Args: []string{"-D", dir},
		Stdout: &out, Stderr: io.Discard, Paths: []string{dir}}); err != nil {
		return err
	}
	fields := controlFields(out.Bytes())
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
	seg := filepath.Join(walDir, keep)
	end, err := checkpointEnd(fields, seg)
	if err != nil {
		// Without the record's end, punch only what already reads as zeros.
		return punchZeroTail(seg)
	}
	return punchFrom(seg, end)
}

// checkpointEnd returns the offset, in its segment file, of the end of the WAL page
// that ends the latest checkpoint record.
func checkpointEnd(fields map[string]string, seg string) (int64, error) {
	var hi, lo uint64
	if _, err := fmt.Sscanf(fields["Latest checkpoint location"], "%X/%X", &hi, &lo); err != nil {
		return 0, fmt.Errorf("checkpoint location %q: %w", fields["Latest checkpoint location"], err)
	}
	segSize, err1 := strconv.ParseInt(fields["Bytes per WAL segment"], 10, 64)
	pageSize, err2 := strconv.ParseInt(fields["WAL block size"], 10, 64)
	if err1 != nil || err2 != nil || segSize <= 0 || pageSize <= 0 {
		return 0, fmt.Errorf("WAL segment or block size missing")
	}
	off := int64((hi<<32 | lo) % uint64(segSize))
	f, err := os.Open(seg)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var hdr [4]byte // XLogRecord.xl_tot_len, little-endian on the platforms Postgres runs here
	if _, err := f.ReadAt(hdr[:], off); err != nil {
		return 0, err
	}
	total := int64(binary.LittleEndian.Uint32(hdr[:]))
	if total < 24 || off+total > segSize {
		return 0, fmt.Errorf("implausible checkpoint record length %d at %d", total, off)
	}
	end := off + total
	return (end + pageSize - 1) / pageSize * pageSize, nil
}

// punchFrom turns everything from offset keep to the end of the file into a hole.
func punchFrom(path string, keep int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if keep >= st.Size() {
		return nil
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, keep, st.Size()-keep); err != nil {
		return fmt.Errorf("punch hole in %s: %w", filepath.Base(path), err)
	}
	return f.Sync()
}

// punchZeroTail turns everything after the last page holding a non-zero byte into a hole.
func punchZeroTail(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	const page = 8192
	buf := make([]byte, page)
	var end int64 // offset just past the last page with data
	for off := int64(0); ; off += page {
		n, err := f.ReadAt(buf, off)
		if !allZero(buf[:n]) {
			end = off + page
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	return punchFrom(path, end)
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
