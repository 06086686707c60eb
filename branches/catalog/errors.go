package catalog

import "errors"

// ErrNotFound is returned when a source, seed or branch does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when a source or branch of that name already exists.
var ErrExists = errors.New("already exists")

// ErrNotEmpty is returned by Copy when the destination catalog already has rows.
var ErrNotEmpty = errors.New("catalog is not empty")

// ErrUnavailable is returned (wrapped) when the catalog cannot be reached: a
// Postgres catalog that is down, restarting or unreachable. The call may succeed
// once it is back.
var ErrUnavailable = errors.New("catalog unavailable")
