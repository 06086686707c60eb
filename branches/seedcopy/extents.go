package seedcopy

import (
	"errors"
	"hash"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// extent is a run of a file that may hold data; what lies between extents is a hole.
type extent struct{ off, len int64 }

// dataExtents calls fn for each data extent of f in [0, size), in order, found with
// SEEK_DATA and SEEK_HOLE. A filesystem that does not support them gives one extent
// of the whole file.
func dataExtents(f *os.File, size int64, fn func(extent) error) error {
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole from off to the end
		}
		if err != nil {
			if off == 0 && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)) {
				return fn(extent{0, size})
			}
			return err
		}
		if start >= size {
			return nil
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return err
		}
		if end > size {
			end = size
		}
		if end <= start {
			return io.ErrNoProgress
		}
		if err := fn(extent{start, end - start}); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// hashZeros adds n zero bytes to h, as a hole reads, without touching the disk.
func hashZeros(h hash.Hash, zeros []byte, n int64) {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		h.Write(zeros[:k])
		n -= k
	}
}

// hashFile returns the SHA-256 of f's first size bytes, reading only its data
// extents through buf and hashing zeros for the holes from zeros.
func hashFile(f *os.File, size int64, buf, zeros []byte) ([]byte, error) {
	h := newHasher()
	pos := int64(0)
	err := dataExtents(f, size, func(x extent) error {
		hashZeros(h, zeros, x.off-pos)
		if err := copyRange(h, f, x, buf); err != nil {
			return err
		}
		pos = x.off + x.len
		return nil
	})
	if err != nil {
		return nil, err
	}
	hashZeros(h, zeros, size-pos)
	return h.Sum(nil), nil
}

// copyRange writes the bytes of x read from f to w, through buf.
func copyRange(w io.Writer, f *os.File, x extent, buf []byte) error {
	for done := int64(0); done < x.len; {
		n := int(min(int64(len(buf)), x.len-done))
		if _, err := f.ReadAt(buf[:n], x.off+done); err != nil {
			if err == io.EOF {
				return ErrChanged
			}
			return err
		}
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		done += int64(n)
	}
	return nil
}
