package seedcopy

import "errors"

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrCorrupt: the stream or the manifest is not what it should be (a content
	// hash that does not match, a stream cut short or with bytes after its end, an
	// extent out of order or past its file's size, an unsafe path, an unknown kind).
	// It points at the peer or the catalog, never at the local disk.
	ErrCorrupt = errors.New("seed copy is corrupt")
	// ErrExists: the directory Receive was to create is already there.
	ErrExists = errors.New("seed copy target already exists")
	// ErrChanged: Send found a file that is no longer what the manifest says (its
	// size or kind differs), so the seed changed on disk after Build.
	ErrChanged = errors.New("seed changed since its manifest was built")
)
