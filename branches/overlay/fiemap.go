package overlay

import (
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FIEMAP ioctl (linux/fiemap.h).
const (
	fsIocFiemap        = 0xC020660B
	fiemapFlagSync     = 0x1
	fiemapExtentLast   = 0x1
	fiemapExtentShared = 0x2000
	fiemapBatch        = 128
)

type fiemapHeader struct {
	Start         uint64
	Length        uint64
	Flags         uint32
	MappedExtents uint32
	ExtentCount   uint32
	Reserved      uint32
}

type fiemapExtent struct {
	Logical    uint64
	Physical   uint64
	Length     uint64
	Reserved64 [2]uint64
	Flags      uint32
	Reserved   [3]uint32
}

type fiemapBuf struct {
	hdr     fiemapHeader
	extents [fiemapBatch]fiemapExtent
}

// extentBytes returns the bytes of f's extents, split into those shared with other
// files (reflink clones) and those only f holds.
func extentBytes(f *os.File) (shared, exclusive int64, err error) {
	var buf fiemapBuf
	var start uint64
	for {
		buf.hdr = fiemapHeader{Start: start, Length: ^uint64(0) - start, Flags: fiemapFlagSync, ExtentCount: fiemapBatch}
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf))); errno != 0 {
			return 0, 0, errno
		}
		n := int(buf.hdr.MappedExtents)
		if n == 0 {
			return shared, exclusive, nil
		}
		for _, e := range buf.extents[:n] {
			if e.Flags&fiemapExtentShared != 0 {
				shared += int64(e.Length)
			} else {
				exclusive += int64(e.Length)
			}
		}
		last := buf.extents[n-1]
		if last.Flags&fiemapExtentLast != 0 {
			return shared, exclusive, nil
		}
		start = last.Logical + last.Length
	}
}

// ExclusiveBytes sums, under dir, the extents of regular files that no other file
// shares, plus the allocated size of everything else: the bytes a branch owns where
// copy-up clones (XFS with reflink=1, btrfs). A file whose extents cannot be mapped
// counts its allocated size.
func ExclusiveBytes(dir string) (int64, error) {
	return sumTree(dir, func(path string, info fs.FileInfo) (int64, error) {
		if !info.Mode().IsRegular() {
			return allocated(info), nil
		}
		f, err := os.Open(path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if _, excl, err := extentBytes(f); err == nil {
			return excl, nil
		}
		return allocated(info), nil
	})
}
