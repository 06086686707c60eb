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
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

var walSegmentName = regexp.MustCompile(`^[0-9A-F]{24}$`)

// IsWALSegment reports whether name is a WAL segment file's name.
func IsWALSegment(name string) bool { return walSegmentName.MatchString(name) }

// trimWAL keeps only the WAL segment holding the shutdown checkpoint's redo point
// (and the next one, when the checkpoint record runs on into it) and turns everything
// after the WAL page that ends the checkpoint record into a hole. After a clean
// shutdown that record is the last one: what follows is zeros (a new segment) or
// stale bytes of a recycled segment (a copied data directory), and recovery stops at
// either, so a hole there changes nothing Postgres reads as WAL.
func (b *Builder) trimWAL(ctx context.Context, dir, version, image string) error {
	fields, err := b.controlData(ctx, dir, version, image)
	if err != nil {
		return err
	}
	if st := fields["Database cluster state"]; st != "shut down" {
		return fmt.Errorf("%w (state %q)", errNotShutDown, st)
	}
	redo := fields["Latest checkpoint's REDO WAL file"]
	if !walSegmentName.MatchString(redo) {
		return fmt.Errorf("pg_controldata gave no REDO WAL file (%q)", redo)
	}
	walDir := filepath.Join(dir, "pg_wal")
	// The record's end is read before anything is removed: it says which
	// segments to keep. Without it, only what already reads as zeros is punched.
	last, end, endErr := checkpointEnd(fields, filepath.Join(walDir, redo))
	keep := []string{redo}
	if endErr == nil && last != redo {
		keep = append(keep, last)
	}
	entries, err := os.ReadDir(walDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if walSegmentName.MatchString(e.Name()) && !slices.Contains(keep, e.Name()) {
			if err := os.Remove(filepath.Join(walDir, e.Name())); err != nil {
				return err
			}
		}
	}
	status, _ := os.ReadDir(filepath.Join(walDir, "archive_status"))
	for _, e := range status {
		os.Remove(filepath.Join(walDir, "archive_status", e.Name()))
	}
	if endErr != nil {
		return punchZeroTail(filepath.Join(walDir, redo))
	}
	return punchFrom(filepath.Join(walDir, last), end)
}

// checkpointEnd returns the segment holding the end of the latest checkpoint
// record (the next one's name when the record runs on past the end of seg's) and
// the offset, in that segment's file, of the end of the WAL page where it ends.
func checkpointEnd(fields map[string]string, seg string) (last string, end int64, err error) {
	var hi, lo uint64
	if _, err := fmt.Sscanf(fields["Latest checkpoint location"], "%X/%X", &hi, &lo); err != nil {
		return "", 0, fmt.Errorf("checkpoint location %q: %w", fields["Latest checkpoint location"], err)
	}
	segSize, err1 := strconv.ParseInt(fields["Bytes per WAL segment"], 10, 64)
	pageSize, err2 := strconv.ParseInt(fields["WAL block size"], 10, 64)
	if err1 != nil || err2 != nil || segSize <= 0 || pageSize <= 0 {
		return "", 0, fmt.Errorf("WAL segment or block size missing")
	}
	off := int64((hi<<32 | lo) % uint64(segSize))
	f, err := os.Open(seg)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	var hdr [4]byte // XLogRecord.xl_tot_len, little-endian on the platforms Postgres runs here
	if _, err := f.ReadAt(hdr[:], off); err != nil {
		return "", 0, err
	}
	total := int64(binary.LittleEndian.Uint32(hdr[:]))
	if total < 24 || total > pageSize {
		return "", 0, fmt.Errorf("implausible checkpoint record length %d at %d", total, off)
	}
	last, end = filepath.Base(seg), off+total
	if end > segSize {
		// The rest follows the next segment's first page header, a long one.
		if last, err = nextSegment(last, segSize); err != nil {
			return "", 0, err
		}
		end = longPageHeader + end - segSize
	}
	return last, (end + pageSize - 1) / pageSize * pageSize, nil
}

// longPageHeader is the size of the header of a segment's first WAL page
// (XLogLongPageHeaderData).
const longPageHeader = 40

// nextSegment returns the name of the WAL segment after name, for segments of
// segSize bytes: timeline, then the high and low halves of the segment number.
func nextSegment(name string, segSize int64) (string, error) {
	var tli, log, seg uint64
	if _, err := fmt.Sscanf(name, "%08X%08X%08X", &tli, &log, &seg); err != nil {
		return "", fmt.Errorf("WAL segment name %q: %w", name, err)
	}
	if seg++; seg == (1<<32)/uint64(segSize) {
		log, seg = log+1, 0
	}
	return fmt.Sprintf("%08X%08X%08X", tli, log, seg), nil
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
