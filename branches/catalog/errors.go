package catalog

import "errors"

// ErrNotFound is returned when a source, seed or branch does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when a source or branch of that name already exists.
var ErrExists = errors.New("already exists")
