package branches

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// A log past its limit is copied to .1 and emptied in place; the server's
// O_APPEND descriptor then writes at its start.
func TestRotateLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "postgres.log")
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	first := bytes.Repeat([]byte("LOG:  statement: SELECT 1\n"), 100)
	w.Write(first)
	if rotated, err := rotateLog(path, int64(len(first))); rotated || err != nil {
		t.Fatalf("at its limit: rotated %v, %v; want left alone", rotated, err)
	}
	w.Write([]byte("one more\n"))
	if rotated, err := rotateLog(path, int64(len(first))); !rotated || err != nil {
		t.Fatalf("past its limit: rotated %v, %v", rotated, err)
	}
	w.Write([]byte("after\n"))
	if got, _ := os.ReadFile(path); string(got) != "after\n" {
		t.Errorf("log after rotation holds %q, want the server's next line alone", got)
	}
	if got, _ := os.ReadFile(path + ".1"); !bytes.Equal(got, append(first, "one more\n"...)) {
		t.Errorf("older part holds %d bytes, want the %d the log had", len(got), len(first)+9)
	}
	// The next rotation replaces the older part.
	w.Write(first)
	if rotated, err := rotateLog(path, 10); !rotated || err != nil {
		t.Fatalf("second rotation: %v, %v", rotated, err)
	}
	if got, _ := os.ReadFile(path + ".1"); !bytes.Equal(got, append([]byte("after\n"), first...)) {
		t.Errorf("older part after a second rotation holds %d bytes, want %d", len(got), len(first)+6)
	}
	if _, err := os.Stat(path + ".1.tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary copy left behind: %v", err)
	}
	// No log, or no limit: nothing to do.
	if rotated, err := rotateLog(filepath.Join(t.TempDir(), "none.log"), 10); rotated || err != nil {
		t.Errorf("missing log: rotated %v, %v", rotated, err)
	}
	if rotated, err := rotateLog(path, 0); rotated || err != nil {
		t.Errorf("no limit: rotated %v, %v", rotated, err)
	}
}

// When the older part cannot be written, the log is emptied all the same.
func TestRotateLogWithoutCopy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "postgres.log")
	os.WriteFile(path, bytes.Repeat([]byte("x"), 100), 0o600)
	os.Mkdir(path+".1.tmp", 0o700) // the copy cannot be created
	os.WriteFile(filepath.Join(path+".1.tmp", "f"), nil, 0o600)
	rotated, err := rotateLog(path, 10)
	if !rotated || err == nil {
		t.Fatalf("rotated %v, %v; want rotated with the copy's error", rotated, err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Errorf("log holds %d bytes, want it emptied", fi.Size())
	}
}
