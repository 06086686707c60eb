package seed

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
)

const page = 8192

func allocatedBytes(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

func TestPunchZeroTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		size      int
		dataPages []int // pages holding a non-zero byte
		partial   bool  // the non-zero byte is the page's last byte, not its first
		wantAlloc int64 // allocated bytes afterwards; -1: unchanged
	}{
		{"WAL segment with three pages of data", 16 << 20, []int{0, 1, 2}, false, 3 * page},
		{"last byte of page three", 16 << 20, []int{2}, true, 3 * page},
		{"zero pages inside the data are kept", 1 << 20, []int{0, 5}, false, 6 * page},
		{"all data", 1 << 20, nil, false, -1},
		{"all zeros", 1 << 20, []int{}, false, 0},
		{"data in the last page", 1 << 20, []int{0, 127}, false, -1},
		{"size not a page multiple, data in the short tail", 3*page + 100, []int{3}, false, -1},
		{"size not a page multiple, zero tail", 3*page + 100, []int{0}, false, page},
		{"empty file", 0, []int{}, false, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			content := make([]byte, tc.size)
			if tc.dataPages == nil { // all data
				for i := range content {
					content[i] = byte(i%251 + 1)
				}
			}
			for _, p := range tc.dataPages {
				lo, hi := p*page, min((p+1)*page, tc.size)
				if tc.partial {
					content[hi-1] = 0x7F
					continue
				}
				for i := lo; i < hi; i++ {
					content[i] = byte(i%251 + 1)
				}
			}
			path := filepath.Join(t.TempDir(), "000000010000000000000002")
			// Write every byte, zeros included, so the file starts fully allocated.
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			before := allocatedBytes(t, path)
			if before < int64(tc.size) {
				t.Fatalf("file written in full has only %d of %d bytes allocated", before, tc.size)
			}

			if err := punchZeroTail(path); err != nil {
				t.Fatalf("punchZeroTail: %v", err)
			}

			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, content) {
				t.Fatalf("content changed (len %d, want %d)", len(got), len(content))
			}
			after := allocatedBytes(t, path)
			want := tc.wantAlloc
			if want < 0 {
				want = before
			}
			// Allow one extra 4 KiB block for filesystem metadata such as an extent block.
			if after < want || after > want+4096 {
				t.Errorf("allocated %d bytes afterwards (was %d), want about %d", after, before, want)
			}
		})
	}
}

func TestPunchZeroTailMissing(t *testing.T) {
	t.Parallel()
	if err := punchZeroTail(filepath.Join(t.TempDir(), "missing")); !os.IsNotExist(err) {
		t.Errorf("punchZeroTail(missing) = %v, want a not-exist error", err)
	}
}

func TestControlFields(t *testing.T) {
	t.Parallel()
	out := []byte(`pg_control version number:            1300
Catalog version number:               202209061
Database system identifier:           7312345678901234567
Database cluster state:               shut down
pg_control last modified:             Sat 14 Mar 2026 03:15:26 PM UTC
Latest checkpoint location:           0/2000028
Latest checkpoint's REDO location:    0/2000028
Latest checkpoint's REDO WAL file:    000000010000000000000002
Latest checkpoint's NextXID:          0:735
Mock authentication nonce:            0f3a
no colon on this line
`)
	got := controlFields(out)
	tests := []struct {
		key, want string
	}{
		{"Database cluster state", "shut down"},
		{"Latest checkpoint's REDO WAL file", "000000010000000000000002"},
		{"Latest checkpoint's REDO location", "0/2000028"},
		{"pg_control version number", "1300"},
		{"pg_control last modified", "Sat 14 Mar 2026 03:15:26 PM UTC"}, // only the first colon splits
		{"Latest checkpoint's NextXID", "0:735"},
	}
	for _, tc := range tests {
		if v, ok := got[tc.key]; !ok || v != tc.want {
			t.Errorf("controlFields[%q] = %q (present %v), want %q", tc.key, v, ok, tc.want)
		}
	}
	if _, ok := got["no colon on this line"]; ok {
		t.Error("a line without a colon became a field")
	}
	if len(got) != 10 {
		t.Errorf("controlFields has %d fields, want 10: %q", len(got), got)
	}
	if m := controlFields(nil); len(m) != 0 {
		t.Errorf("controlFields(nil) = %q, want empty", m)
	}
}

func TestScanLinesOrCR(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"one line", "initdb done\n", []string{"initdb done"}},
		{"no final newline", "a\nb", []string{"a", "b"}},
		{"progress meter", "  1/100 kB (1%)\r 50/100 kB (50%)\r100/100 kB (100%)\n",
			[]string{"  1/100 kB (1%)", " 50/100 kB (50%)", "100/100 kB (100%)"}},
		{"CRLF gives an empty token", "a\r\nb\r\n", []string{"a", "", "b", ""}},
		{"only separators", "\n\r\n", []string{"", "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := bufio.NewScanner(strings.NewReader(tc.in))
			sc.Split(scanLinesOrCR)
			var got []string
			for sc.Scan() {
				got = append(got, sc.Text())
			}
			if err := sc.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("tokens = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestScanLinesOrCRChunked feeds the input one byte at a time, as a pipe may.
func TestScanLinesOrCRChunked(t *testing.T) {
	t.Parallel()
	sc := bufio.NewScanner(iotest.OneByteReader(strings.NewReader("ab\rcd\nef")))
	sc.Split(scanLinesOrCR)
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ab", "cd", "ef"}; !slices.Equal(got, want) {
		t.Errorf("tokens = %q, want %q", got, want)
	}
}

func TestQuoteIdent(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"app", `"app"`},
		{"My DB", `"My DB"`},
		{`a"b`, `"a""b"`},
	}
	for _, tc := range tests {
		if got := quoteIdent(tc.in); got != tc.want {
			t.Errorf("quoteIdent(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestURLUser(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://alice@db.example:5432/app?replication=database", "alice"},
		{"host=db user=bob dbname=app", "bob"},
		{"postgres://%zz", ""}, // unparseable
	}
	for _, tc := range tests {
		if got := urlUser(tc.in); got != tc.want {
			t.Errorf("urlUser(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCleanRuntimeFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, p := range []string{"postmaster.opts", "pg_stat_tmp/global.stat", "pg_stat_tmp/db_1.stat", "PG_VERSION"} {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cleanRuntimeFiles(dir)
	if _, err := os.Stat(filepath.Join(dir, "postmaster.opts")); !os.IsNotExist(err) {
		t.Errorf("postmaster.opts left: %v", err)
	}
	if es, err := os.ReadDir(filepath.Join(dir, "pg_stat_tmp")); err != nil || len(es) != 0 {
		t.Errorf("pg_stat_tmp = %v, %v; want an empty directory", es, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		t.Errorf("PG_VERSION removed: %v", err)
	}
}

func TestNextSegment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		segSize int64
		want    string
	}{
		{"000000010000000000000004", 16 << 20, "000000010000000000000005"},
		{"0000000100000000000000FF", 16 << 20, "000000010000000100000000"},
		{"000000020000000300000FFF", 1 << 20, "000000020000000400000000"},
		{"000000010000000000000FFF", 16 << 20, "000000010000000000001000"},
	} {
		got, err := nextSegment(tc.name, tc.segSize)
		if err != nil || got != tc.want {
			t.Errorf("nextSegment(%s, %d) = %s, %v; want %s", tc.name, tc.segSize, got, err, tc.want)
		}
	}
	if _, err := nextSegment("pg_wal", 16<<20); err == nil {
		t.Error("a name that is not a segment's was accepted")
	}
}

// A checkpoint record is found where pg_controldata says, and one that runs past
// the end of its segment ends in the next one, after that one's long page header.
func TestCheckpointEnd(t *testing.T) {
	t.Parallel()
	const segSize = 1 << 20
	for _, tc := range []struct {
		name     string
		off      int64
		wantLast string
		wantEnd  int64
	}{
		{"inside the segment", 3*page + 40, "000000010000000000000004", 4 * page},
		{"ends on a page boundary", 4*page - 114, "000000010000000000000004", 4 * page},
		{"runs into the next segment", segSize - 50, "000000010000000000000005", page},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			seg := filepath.Join(t.TempDir(), "000000010000000000000004")
			content := make([]byte, segSize)
			binary.LittleEndian.PutUint32(content[tc.off:], 114)
			if err := os.WriteFile(seg, content, 0o600); err != nil {
				t.Fatal(err)
			}
			fields := map[string]string{
				"Latest checkpoint location": fmt.Sprintf("0/%X", 4*segSize+tc.off),
				"Bytes per WAL segment":      fmt.Sprint(segSize),
				"WAL block size":             fmt.Sprint(page),
			}
			last, end, err := checkpointEnd(fields, seg)
			if err != nil || last != tc.wantLast || end != tc.wantEnd {
				t.Errorf("checkpointEnd = %s, %d, %v; want %s, %d", last, end, err, tc.wantLast, tc.wantEnd)
			}
		})
	}
}
