// Package seedcopy copies a settled seed directory from the node that built it to
// another node, keeping sparse files sparse.
//
// The builder describes the directory once with Build: a Manifest lists every
// directory, regular file and symbolic link under it, sorted by path (so parents come
// before children), with its permission bits, whether the service user owns it (the
// data directory) or root does (the generation directory, snapshot.json), and for a
// file its size and the SHA-256 of its content with holes read as zeros. The manifest
// is small; it goes to the catalog and its Digest names the copy. Other nodes ask the
// builder for the stream of that manifest (Send) and turn it back into a directory
// (Receive).
//
// The stream is binary, all integers big-endian:
//
//	header   "PGBSEED\x01", then the manifest's 32-byte SHA-256 digest
//	per file entry, in manifest order:
//	  'd' offset(8) length(4) bytes   one frame per data run of at most 1 MiB,
//	                                  offsets increasing, frames not overlapping
//	  'f'                             end of this file
//	end      'z', then nothing
//
// Only data extents travel, found with SEEK_DATA and SEEK_HOLE (a filesystem without
// them gives one extent of the whole file), so the settled WAL segment's zero tail
// costs nothing on the wire. Directories and symbolic links carry no data: the
// manifest says all there is about them.
//
// Receive trusts neither the stream nor the manifest. It refuses absolute paths,
// ".." elements, an entry whose parent is not an earlier directory entry, an unknown
// kind, setuid bits, a stream made for another manifest, an extent past its file's
// size or out of order, a stream cut short or with bytes after its end, and a file
// whose hash does not match; all of these wrap ErrCorrupt, so a caller can tell a bad
// peer from a local disk error. Each file is created at its full size with ftruncate
// and its extents written at their offsets, so a hole on the sender stays a hole on
// the receiver, and hashed as it arrives with zeros hashed for the gaps, never read
// back. Entries are created under dir+".part", owned and moded as the manifest says,
// files and directories fsynced, and only then renamed to dir: a crash leaves at
// most a .part directory, which the next Receive removes. Memory stays at about
// 1 MiB per copy whatever the size of the seed.
package seedcopy
