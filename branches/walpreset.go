package branches

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seedcopy"
	"golang.org/x/sys/unix"
)

// presetWAL gives a new (or reset) branch of a seed its own copy of the seed's WAL
// segment in its upper layer before its server starts. The server's first write
// goes to that segment, and without the copy OverlayFS would copy it up then, on
// the client's time: in whole 1 MiB chunks, with an fsync, although the seed's
// segment holds a few pages and holes (seed/trim.go). Here only the pages are
// copied. lower is the seed's data directory, the branch's only lower layer; tmp
// is a directory on upper's filesystem that presetWAL may replace. An upper layer
// that already has pg_wal is left alone; a seed with other than one segment is
// left to OverlayFS.
//
// Like OverlayFS's own copy-up, the copy appears whole or not at all: it is made
// in tmp and renamed into place once synced, because the first start that finds
// pg_wal in the upper layer uses it as the branch's WAL for good.
func presetWAL(lower, upper, tmp string, uid, gid int) error {
	uwal := filepath.Join(upper, "pg_wal")
	if _, err := os.Lstat(uwal); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	lwal := filepath.Join(lower, "pg_wal")
	entries, err := os.ReadDir(lwal)
	if err != nil {
		return err
	}
	var segs []string
	for _, e := range entries {
		if e.Type().IsRegular() && seed.IsWALSegment(e.Name()) {
			segs = append(segs, e.Name())
		}
	}
	if len(segs) != 1 {
		return nil
	}
	st, err := os.Stat(lwal)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(tmp); err != nil { // what an interrupted preset left
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, st.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Chown(tmp, uid, gid); err != nil {
		return err
	}
	if err := copySparse(filepath.Join(lwal, segs[0]), filepath.Join(tmp, segs[0]), uid, gid); err != nil {
		return err
	}
	if err := seedcopy.SyncDir(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(upper, 0o700); err != nil {
		return err
	}
	if err := os.Chown(upper, uid, gid); err != nil {
		return err
	}
	if err := os.Rename(tmp, uwal); err != nil {
		return err
	}
	// The name must last: were it lost in a crash, the server would find the
	// seed's segment without the records written to the copy.
	if err := seedcopy.SyncDir(upper); err != nil {
		os.RemoveAll(uwal)
		return err
	}
	return nil
}

// copySparse copies src's data to a new file dst owned by uid:gid, keeping src's
// holes as holes and its size and mode, and syncs it.
func copySparse(src, dst string, uid, gid int) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm())
	if err != nil {
		return err
	}
	defer out.Close()
	if err := out.Chown(uid, gid); err != nil {
		return err
	}
	for off := int64(0); off < st.Size(); {
		start, err := unix.Seek(int(in.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return fmt.Errorf("find data in %s: %w", filepath.Base(src), err)
		}
		end, err := unix.Seek(int(in.Fd()), start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("find hole in %s: %w", filepath.Base(src), err)
		}
		if _, err := io.Copy(io.NewOffsetWriter(out, start), io.NewSectionReader(in, start, end-start)); err != nil {
			return err
		}
		off = end
	}
	if err := out.Truncate(st.Size()); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	return out.Close()
}
