package errs

// Branch and source errors.
var (
	// ErrNotFound: no such branch or source.
	ErrNotFound = &Error{text: "not found", code: codeInvalidCatalogName,
		message: "no such source or branch"}
	// ErrExists: a branch or source of that name already exists. A client meets
	// it when two nodes raced for one new name: the other one has it.
	ErrExists = &Error{text: "already exists", code: codeCannotConnectNow,
		message: "the branch is being created elsewhere", hint: "try again in a moment"}
	// ErrOtherParent: a client named a parent (pgbranch.from) for a branch that
	// exists and was made from another, or from the seed. The option names the
	// parent of a new branch only; two clients forking one new name from two
	// parents must not share a branch unknowingly.
	ErrOtherParent = &Error{text: "the branch exists with another parent", code: codeDuplicateDatabase,
		message: "a branch of this name exists, made from another parent",
		hint:    "pgbranch.from names the parent of a new branch only: connect without it to use this branch, or give the fork a name of its own"}
	// ErrNotReady: the branch did not become ready before the caller's deadline; its
	// creation or wake goes on.
	ErrNotReady = &Error{text: "branch is still starting", code: codeCannotConnectNow,
		message: "the branch is still starting up", hint: "try again in a moment"}
	// ErrBusy: the operation needs the branch to have no sessions.
	ErrBusy = &Error{text: "branch has open sessions", code: codeObjectInUse,
		message: "the branch is in use by other sessions", hint: "pgbranch.reset=on needs the branch to have no other session"}
	// ErrEnded: the branch's server was stopped, or the branch destroyed, under
	// the session by an administrator (reset, stop or destroy with Force).
	ErrEnded = &Error{text: "the branch was stopped or destroyed by an administrator", code: codeAdminShutdown,
		hint: "connect again: a stopped branch wakes, a destroyed one is created anew"}
	// ErrStartFailed: the branch's server did not start (its runtime refused it:
	// a missing image, limits it cannot run with; or Postgres exited at start).
	// Not the client's to mend, and rarely mended by trying again: an
	// administrator reads why in branch ls or the log.
	ErrStartFailed = &Error{text: "the branch's server did not start", code: codeSystemError,
		hint: "pgbranchproxy branch ls shows why"}
	// ErrNotGone: an ephemeral branch of the name, whose last session ended, could
	// not be destroyed yet, so no new branch of the name can start.
	ErrNotGone = &Error{text: "an ephemeral branch of this name could not be destroyed yet", code: codeCannotConnectNow,
		message: "an ephemeral branch of this name whose last session ended could not be destroyed yet",
		hint:    "try again in a moment; the server's log says what kept it"}
	// ErrClosed: the engine is shutting down.
	ErrClosed = &Error{text: "shutting down", code: codeAdminShutdown,
		message: "the proxy is shutting down"}
	// ErrInvalid: a request that can never succeed (bad name, unknown option value).
	ErrInvalid = &Error{text: "invalid request", code: codeInvalidParameter,
		message: "invalid branch request"}
	// ErrLayerMissing: a read-only layer of the branch (its seed, or a fork
	// layer) is not on this node's disk: a seed built by another node that could
	// not be copied here.
	ErrLayerMissing = &Error{text: "a layer of the branch is not on this node", code: codeCannotConnectNow,
		message: "the branch's seed is not on the node that serves it",
		hint:    "it could not be copied from a node that holds it: check that the nodes reach each other's peer address (pgbranchproxy node ls)"}
)

// Catalog errors (package catalog returns them).
var (
	// ErrCatalogUnavailable: the catalog cannot be reached (a Postgres catalog
	// down, restarting or unreachable); the call may succeed once it is back.
	ErrCatalogUnavailable = &Error{text: "catalog unavailable", code: codeCannotConnectNow,
		hint: "branches already running still serve; creating or waking one works again when the catalog is back"}
	// ErrFenced: a write to a branch row that this node no longer owns (the row
	// carries another node or epoch, or was declared lost) changed nothing; the
	// node stops using the branch's local instance.
	ErrFenced = &Error{text: "the branch is no longer this node's", code: codeCannotConnectNow,
		message: "the branch is no longer served by this pgbranchproxy node",
		hint:    "another registration of this node owns it in the catalog; restart the server"}
	// ErrNodeLost: this node's registration in the catalog is gone (registered
	// again elsewhere, or declared dead); it comes wrapped with ErrFenced.
	ErrNodeLost = &Error{text: "this node lost its registration in the catalog", code: codeCannotConnectNow,
		message: "this pgbranchproxy node lost its registration in the catalog",
		hint:    "it stopped its branches' servers and serves none until it is restarted"}
	// ErrLost: the branch was on a node declared dead; only destroying it is
	// possible. It comes wrapped with ErrFenced.
	ErrLost = &Error{text: "branch was on a lost node", code: codeCannotConnectNow,
		message: "the branch was on a lost node",
		hint:    "its node was declared dead; destroy the branch (pgbranchproxy branch destroy) to use the name again"}
	// ErrDraining: this node is draining and creates no new branch (its branches
	// go on serving).
	ErrDraining = &Error{text: "the node is draining", code: codeCannotConnectNow,
		message: "this pgbranchproxy node is draining: it takes no new branches",
		hint:    "new branches go to the nodes that are not draining (a front places them there); pgbranchproxy node resume ends the drain"}
)

// Resource errors.
var (
	// ErrQuota: the branch owns more than its quota and refuses new sessions. The
	// engine returns it as a *branches.QuotaError, whose message names the branch
	// and its usage.
	ErrQuota = &Error{text: "branch is over its disk quota", code: codeDiskFull,
		hint: QuotaHint}
	// ErrDiskFull: the disk budget is spent and nothing idle can be evicted.
	ErrDiskFull = &Error{text: "disk budget exhausted", code: codeDiskFull,
		message: "no disk budget left for a new branch", hint: "destroy unused branches or raise --disk-budget"}
	// ErrNoSpace: the state directory's filesystem is full.
	ErrNoSpace = &Error{text: "no space left for branches", code: codeDiskFull,
		message: "the disk that holds the branches is full", hint: "reset or destroy branches that filled it"}
	// ErrTooMany: max-running branches all have sessions.
	ErrTooMany = &Error{text: "too many running branches", code: codeTooMany,
		message: "too many branches are running and all of them have sessions",
		hint:    "try again when a session ends, or raise --max-running"}
	// ErrTooManySessions: the branch has its maximum number of sessions.
	ErrTooManySessions = &Error{text: "too many sessions on the branch", code: codeTooMany,
		message: "too many sessions on this branch", hint: "close idle sessions or raise --max-sessions"}
)

// QuotaHint is what a client refused for a branch over its quota is told to do.
const QuotaHint = "reset or destroy the branch, or raise its quota with: pgbranchproxy branch set NAME --quota SIZE"

// precedence ranks the errors for a chain that holds several: a client is told
// of the first of them in this list. Limits and lost resources come before the
// step that met them (a start that failed for want of disk is told 53100), and
// a branch on a lost node, which is also fenced, is told it is lost.
var precedence = []*Error{
	ErrTooManySessions, ErrQuota, ErrDiskFull, ErrNoSpace, ErrTooMany,
	ErrLost, ErrNodeLost, ErrDraining, ErrFenced, ErrLayerMissing, ErrCatalogUnavailable,
	ErrNotGone, ErrNotReady, ErrEnded, ErrNotFound, ErrClosed, ErrExists, ErrOtherParent, ErrBusy, ErrInvalid,
	ErrStartFailed,
}

func init() {
	for i, e := range precedence {
		e.rank = i + 1
	}
}
