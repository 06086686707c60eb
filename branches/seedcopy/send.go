package seedcopy

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Send writes the stream of m's files under dir to w: a header binding it to m's
// digest, then for each file entry in manifest order its data extents and an
// end-of-file mark, then an end-of-stream mark. Holes are not sent. A file whose kind
// or size differs from the manifest's is an error wrapping ErrChanged; an invalid
// manifest one wrapping ErrCorrupt. Send does not hash: the receiver checks every
// file's content. Safe for concurrent use; it only reads dir.
func Send(w io.Writer, dir string, m Manifest) error {
	if err := m.Validate(); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if _, err := bw.WriteString(magic); err != nil {
		return err
	}
	if _, err := bw.Write(m.digest()); err != nil {
		return err
	}
	buf := make([]byte, maxChunk)
	for _, e := range m.Entries {
		if e.Kind != KindFile {
			continue
		}
		if err := sendFile(bw, filepath.Join(dir, filepath.FromSlash(e.Path)), e.Size, buf); err != nil {
			return fmt.Errorf("send %q: %w", e.Path, err)
		}
	}
	if err := bw.WriteByte(tagEnd); err != nil {
		return err
	}
	return bw.Flush()
}

// sendFile writes the data frames of one file and its end-of-file mark.
func sendFile(w *bufio.Writer, name string, size int64, buf []byte) error {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Size() != size {
		return fmt.Errorf("%w: a %v of %d bytes, the manifest says a file of %d", ErrChanged, fi.Mode().Type(), fi.Size(), size)
	}
	err = dataExtents(f, size, func(x extent) error {
		for done := int64(0); done < x.len; {
			n := min(int64(len(buf)), x.len-done)
			if err := sendChunk(w, f, x.off+done, buf[:n]); err != nil {
				return err
			}
			done += n
		}
		return nil
	})
	if err != nil {
		return err
	}
	return w.WriteByte(tagEOF)
}

// sendChunk reads len(buf) bytes of f at off and writes them as one data frame.
func sendChunk(w *bufio.Writer, f *os.File, off int64, buf []byte) error {
	if _, err := f.ReadAt(buf, off); err != nil {
		if err == io.EOF {
			return fmt.Errorf("%w: shorter than its manifest size", ErrChanged)
		}
		return err
	}
	var hdr [dataHeader]byte
	hdr[0] = tagData
	binary.BigEndian.PutUint64(hdr[1:], uint64(off))
	binary.BigEndian.PutUint32(hdr[9:], uint32(len(buf)))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(buf)
	return err
}
