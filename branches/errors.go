package branches

import (
	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
)

// Sentinel errors, package errs's under the engine's names (the front door tests
// them without linking the engine). Callers test them with errors.Is.
var (
	// ErrNotFound: no such branch or source.
	ErrNotFound = errs.ErrNotFound
	// ErrExists: a branch or source of that name already exists.
	ErrExists = errs.ErrExists
	// ErrOtherParent: pgbranch.from names another parent than the existing
	// branch's.
	ErrOtherParent = errs.ErrOtherParent
	// ErrNotReady: the branch did not become ready before the caller's deadline; its
	// creation or wake goes on.
	ErrNotReady = errs.ErrNotReady
	// ErrBusy: the operation needs the branch to have no sessions.
	ErrBusy = errs.ErrBusy
	// ErrEnded: the branch's server was stopped, or the branch destroyed, under
	// the session by an administrator (reset, stop or destroy with Force).
	ErrEnded = errs.ErrEnded
	// ErrStartFailed: the branch's server did not start (its runtime refused it:
	// a missing image, limits it cannot run with; or Postgres exited at start).
	ErrStartFailed = errs.ErrStartFailed
	// ErrNotGone: an ephemeral branch of the name, whose last session ended, could
	// not be destroyed yet, so no new branch of the name can start.
	ErrNotGone = errs.ErrNotGone
	// ErrClosed: the manager is shutting down.
	ErrClosed = errs.ErrClosed
	// ErrInvalid: a request that can never succeed (bad name, unknown option value).
	ErrInvalid = errs.ErrInvalid
	// ErrLayerMissing: a read-only layer of the branch (its seed, or a fork
	// layer) is not on this node's disk: a seed built by another node that could
	// not be copied here (seedpull.go).
	ErrLayerMissing = errs.ErrLayerMissing
	// ErrCatalogUnavailable: the catalog cannot be reached (a Postgres catalog down
	// or restarting), so the branch cannot be created, woken or changed; running
	// branches keep serving. It is catalog.ErrUnavailable.
	ErrCatalogUnavailable = catalog.ErrUnavailable
	// ErrFenced: the branch's catalog row is no longer this server's (another
	// process registered as this node since, or the branch was declared lost), so
	// this server neither changes it nor serves it. It is catalog.ErrFenced.
	ErrFenced = catalog.ErrFenced
	// ErrNodeLost: this server's node registration in the catalog is gone, so it
	// creates and wakes no branch until serve is restarted. It is
	// catalog.ErrNodeLost, and comes wrapped with ErrFenced.
	ErrNodeLost = catalog.ErrNodeLost
	// ErrLost: the branch was on a node the janitor declared dead; only destroying
	// it is possible. It is catalog.ErrLost, and comes from the catalog wrapped
	// with ErrFenced.
	ErrLost = catalog.ErrLost
	// ErrDraining: this node is draining and creates no new branch (its
	// branches go on serving). It is catalog.ErrDraining, wrapped with ErrFenced.
	ErrDraining = catalog.ErrDraining
)

// Resource errors.
var (
	// ErrQuota: the branch owns more than its quota and refuses new sessions.
	ErrQuota = errs.ErrQuota
	// ErrDiskFull: the disk budget is spent and nothing idle can be evicted.
	ErrDiskFull = errs.ErrDiskFull
	// ErrNoSpace: the state directory's filesystem is full.
	ErrNoSpace = errs.ErrNoSpace
	// ErrTooMany: max-running branches all have sessions.
	ErrTooMany = errs.ErrTooMany
)

// ErrTooManySessions: the branch has its maximum number of sessions.
var ErrTooManySessions = errs.ErrTooManySessions

// sourceInUse refuses to remove a source that has branches: a conflict, as
// ErrBusy is (409 for the admin API), but in words of its own, since no branch
// need have a session.
type sourceInUse struct{ msg string }

func (e *sourceInUse) Error() string        { return e.msg }
func (e *sourceInUse) Is(target error) bool { return target == ErrBusy }
