package seedcopy

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Receive reads a stream written by Send for m and creates m's entries in a new
// directory dir, which must not exist (ErrExists) and whose parent must. It works in
// dir+".part", removing one left by an earlier crash, and renames it to dir only
// once every file's content hash matched and everything was synced, so dir either
// does not exist or is complete. Entries with User set are given to uid:gid, the
// others to root; a process that is not root cannot give files away and leaves them
// its own. On error .part is removed, and the error names the entry; errors caused by
// the stream or the manifest wrap ErrCorrupt. Memory use is bounded (about 1 MiB)
// whatever the stream. To stop a copy, close what r reads from (an HTTP body): the
// read error ends Receive and removes .part. Receives into different directories are
// safe to run concurrently; two into the same dir are not.
func Receive(r io.Reader, dir string, m Manifest, uid, gid int) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if _, err := os.Lstat(dir); err == nil {
		return fmt.Errorf("receive into %s: %w", dir, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	part := dir + ".part"
	if err := removeTree(part); err != nil {
		return fmt.Errorf("remove leftover %s: %w", part, err)
	}
	if err := os.Mkdir(part, 0o700); err != nil {
		return err
	}
	rc := &receiver{
		br: bufio.NewReaderSize(r, 64<<10), root: part, uid: uid, gid: gid, chown: os.Geteuid() == 0,
		buf: make([]byte, maxChunk), zeros: make([]byte, zeroChunk),
	}
	if err := rc.run(m); err != nil {
		removeTree(part)
		return err
	}
	if err := renameNoReplace(part, dir); err != nil {
		removeTree(part)
		return err
	}
	return SyncDir(filepath.Dir(dir))
}

// receiver holds the state of one Receive.
type receiver struct {
	br       *bufio.Reader
	root     string
	uid, gid int
	chown    bool
	buf      []byte // one data frame
	zeros    []byte // never written: holes are hashed from it
}

// run reads the header, creates the entries in order, reads the end mark, then gives
// the directories their owners and modes (children first, so a read-only directory
// is filled before it becomes read-only) and syncs them.
func (rc *receiver) run(m Manifest) error {
	if err := rc.readHeader(m); err != nil {
		return err
	}
	for _, e := range m.Entries {
		if err := rc.create(e); err != nil {
			return fmt.Errorf("receive %q: %w", e.Path, err)
		}
	}
	if err := rc.readEnd(); err != nil {
		return err
	}
	for i := len(m.Entries) - 1; i >= 0; i-- {
		if e := m.Entries[i]; e.Kind == KindDir {
			if err := rc.finishDir(e); err != nil {
				return fmt.Errorf("receive %q: %w", e.Path, err)
			}
		}
	}
	return SyncDir(rc.root)
}

func (rc *receiver) readHeader(m Manifest) error {
	var hdr [len(magic) + 32]byte
	if err := rc.readFull(hdr[:]); err != nil {
		return fmt.Errorf("read header: %w", err)
	}
	if string(hdr[:len(magic)]) != magic {
		return fmt.Errorf("%w: not a seed copy stream of this version", ErrCorrupt)
	}
	if want := m.digest(); string(hdr[len(magic):]) != string(want) {
		return fmt.Errorf("%w: stream is for manifest %x, not %x", ErrCorrupt, hdr[len(magic):], want)
	}
	return nil
}

func (rc *receiver) readEnd() error {
	tag, err := rc.readByte()
	if err != nil {
		return fmt.Errorf("read end of stream: %w", err)
	}
	if tag != tagEnd {
		return fmt.Errorf("%w: tag %#x where the stream should end", ErrCorrupt, tag)
	}
	switch _, err := rc.br.ReadByte(); {
	case err == nil:
		return fmt.Errorf("%w: bytes after the end of the stream", ErrCorrupt)
	case err != io.EOF:
		return fmt.Errorf("read end of stream: %w", err)
	}
	return nil
}

// create makes one entry under the root. A directory gets its owner and mode later,
// in finishDir.
func (rc *receiver) create(e Entry) error {
	name := filepath.Join(rc.root, filepath.FromSlash(e.Path))
	switch e.Kind {
	case KindDir:
		return os.Mkdir(name, 0o700)
	case KindSymlink:
		if err := os.Symlink(e.Target, name); err != nil {
			return err
		}
		return rc.lchown(name, e)
	case KindFile:
		return rc.receiveFile(name, e)
	}
	return fmt.Errorf("%w: unknown kind %q", ErrCorrupt, e.Kind)
}

func (rc *receiver) finishDir(e Entry) error {
	name := filepath.Join(rc.root, filepath.FromSlash(e.Path))
	if err := rc.lchown(name, e); err != nil {
		return err
	}
	if err := unix.Chmod(name, e.Mode); err != nil {
		return &fs.PathError{Op: "chmod", Path: name, Err: err}
	}
	return SyncDir(name)
}

// owner returns the uid and gid an entry is given.
func (rc *receiver) owner(e Entry) (int, int) {
	if e.User {
		return rc.uid, rc.gid
	}
	return 0, 0
}

func (rc *receiver) lchown(name string, e Entry) error {
	if !rc.chown {
		return nil
	}
	uid, gid := rc.owner(e)
	return os.Lchown(name, uid, gid)
}

// receiveFile creates a file of the entry's size, writes the stream's extents at
// their offsets (what is not written stays a hole), and checks the content hash.
func (rc *receiver) receiveFile(name string, e Entry) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(e.Size); err != nil {
		return err
	}
	sum, err := rc.readFileData(f, e.Size)
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(sum); got != e.SHA256 {
		return fmt.Errorf("%w: content sha256 %s, the manifest says %s", ErrCorrupt, got, e.SHA256)
	}
	if rc.chown {
		uid, gid := rc.owner(e)
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(int(f.Fd()), e.Mode); err != nil {
		return &fs.PathError{Op: "fchmod", Path: name, Err: err}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// readFileData reads one file's data frames up to its end mark, writes them to f
// and returns the hash of the whole content, zeros hashed for the gaps.
func (rc *receiver) readFileData(f *os.File, size int64) ([]byte, error) {
	h := newHasher()
	pos := int64(0)
	var hdr [dataHeader - 1]byte
	for {
		tag, err := rc.readByte()
		if err != nil {
			return nil, err
		}
		switch tag {
		case tagEOF:
			hashZeros(h, rc.zeros, size-pos)
			return h.Sum(nil), nil
		case tagData:
		default:
			return nil, fmt.Errorf("%w: tag %#x in a file's data", ErrCorrupt, tag)
		}
		if err := rc.readFull(hdr[:]); err != nil {
			return nil, err
		}
		off, n := binary.BigEndian.Uint64(hdr[:8]), int64(binary.BigEndian.Uint32(hdr[8:]))
		switch {
		case n == 0 || n > maxChunk:
			return nil, fmt.Errorf("%w: data frame of %d bytes", ErrCorrupt, n)
		case off < uint64(pos):
			return nil, fmt.Errorf("%w: extent at %d overlaps or precedes the one ending at %d", ErrCorrupt, off, pos)
		case off > uint64(size) || n > size-int64(off):
			return nil, fmt.Errorf("%w: extent [%d, +%d) beyond the size %d", ErrCorrupt, off, n, size)
		}
		hashZeros(h, rc.zeros, int64(off)-pos)
		p := rc.buf[:n]
		if err := rc.readFull(p); err != nil {
			return nil, err
		}
		if _, err := f.WriteAt(p, int64(off)); err != nil {
			return nil, err
		}
		h.Write(p)
		pos = int64(off) + n
	}
}

// readFull fills p from the stream; a stream that ends first is corrupt.
func (rc *receiver) readFull(p []byte) error {
	_, err := io.ReadFull(rc.br, p)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: stream cut short", ErrCorrupt)
	}
	return err
}

func (rc *receiver) readByte() (byte, error) {
	b, err := rc.br.ReadByte()
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return 0, fmt.Errorf("%w: stream cut short", ErrCorrupt)
	}
	return b, err
}
