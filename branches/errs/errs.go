package errs

import "errors"

// Branch and source errors.
var (
	// ErrNotFound: no such branch or source.
	ErrNotFound = errors.New("not found")
	// ErrExists: a branch or source of that name already exists.
	ErrExists = errors.New("already exists")
	// ErrNotReady: the branch did not become ready before the caller's deadline; its
	// creation or wake goes on.
	ErrNotReady = errors.New("branch is still starting")
	// ErrBusy: the operation needs the branch to have no sessions.
	ErrBusy = errors.New("branch has open sessions")
	// ErrEnded: the branch's server was stopped, or the branch destroyed, under
	// the session by an administrator (reset, stop or destroy with Force).
	ErrEnded = errors.New("the branch was stopped or destroyed by an administrator")
	// ErrStartFailed: the branch's server did not start (its runtime refused it:
	// a missing image, limits it cannot run with; or Postgres exited at start).
	ErrStartFailed = errors.New("the branch's server did not start")
	// ErrNotGone: an ephemeral branch of the name, whose last session ended, could
	// not be destroyed yet, so no new branch of the name can start.
	ErrNotGone = errors.New("an ephemeral branch of this name could not be destroyed yet")
	// ErrClosed: the engine is shutting down.
	ErrClosed = errors.New("shutting down")
	// ErrInvalid: a request that can never succeed (bad name, unknown option value).
	ErrInvalid = errors.New("invalid request")
	// ErrLayerMissing: a read-only layer of the branch (its seed, or a fork
	// layer) is not on this node's disk: a seed built by another node that could
	// not be copied here.
	ErrLayerMissing = errors.New("a layer of the branch is not on this node")
)

// Catalog errors (package catalog returns them).
var (
	// ErrCatalogUnavailable: the catalog cannot be reached (a Postgres catalog
	// down, restarting or unreachable); the call may succeed once it is back.
	ErrCatalogUnavailable = errors.New("catalog unavailable")
	// ErrFenced: a write to a branch row that this node no longer owns (the row
	// carries another node or epoch, or was declared lost) changed nothing; the
	// node stops using the branch's local instance.
	ErrFenced = errors.New("the branch is no longer this node's")
	// ErrNodeLost: this node's registration in the catalog is gone (registered
	// again elsewhere, or declared dead); it comes wrapped with ErrFenced.
	ErrNodeLost = errors.New("this node lost its registration in the catalog")
	// ErrLost: the branch was on a node declared dead; only destroying it is
	// possible. It comes wrapped with ErrFenced.
	ErrLost = errors.New("branch was on a lost node")
	// ErrDraining: this node is draining and creates no new branch (its branches
	// go on serving).
	ErrDraining = errors.New("the node is draining")
)

// Resource errors.
var (
	// ErrQuota: the branch owns more than its quota and refuses new sessions.
	ErrQuota = errors.New("branch is over its disk quota")
	// ErrDiskFull: the disk budget is spent and nothing idle can be evicted.
	ErrDiskFull = errors.New("disk budget exhausted")
	// ErrNoSpace: the state directory's filesystem is full.
	ErrNoSpace = errors.New("no space left for branches")
	// ErrTooMany: max-running branches all have sessions.
	ErrTooMany = errors.New("too many running branches")
	// ErrTooManySessions: the branch has its maximum number of sessions.
	ErrTooManySessions = errors.New("too many sessions on the branch")
)
