package seedcopy

import (
	"crypto/sha256"
	"hash"
)

// The stream format (see the package comment).
const (
	magic = "PGBSEED\x01" // 8 bytes: the format and its version

	tagData = 'd' // an extent: offset (8 bytes), length (4 bytes), then the bytes
	tagEOF  = 'f' // the current file ends
	tagEnd  = 'z' // the stream ends; nothing may follow

	dataHeader = 1 + 8 + 4 // tag, offset, length

	// maxChunk bounds one data frame's length, and so the receiver's buffer.
	maxChunk = 1 << 20
	// zeroChunk is the size of the zero buffer holes are hashed from.
	zeroChunk = 64 << 10
)

func newHasher() hash.Hash { return sha256.New() }
