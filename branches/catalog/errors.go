package catalog

import (
	"errors"
	"fmt"

	"github.com/pgbranchproxy/pgbranchproxy/branches/errs"
)

// ErrNotFound is returned when a source, seed or branch does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when a source or branch of that name already exists.
var ErrExists = errors.New("already exists")

// ErrNotEmpty is returned by Copy when the destination catalog already has rows.
var ErrNotEmpty = errors.New("catalog is not empty")

// ErrNoSource is returned (wrapped) by InsertBranch when the branch's source is
// not recorded: it was never added, or it was removed (DeleteSource, perhaps on
// another node) before the branch could be.
var ErrNoSource = errors.New("no such source")

// ErrSourceHasBranches is returned by DeleteSource when other nodes have branches
// of the source: its seed rows would go from under them.
var ErrSourceHasBranches = errors.New("the source has branches on other nodes")

// ErrUnavailable is returned (wrapped) when the catalog cannot be reached: a
// Postgres catalog that is down, restarting or unreachable. The call may succeed
// once it is back.
var ErrUnavailable = errs.ErrCatalogUnavailable

// ErrFenced is returned (wrapped) by a write to a branch row that this node no
// longer owns: the row carries another node or epoch (the node was registered
// again elsewhere), or it was declared lost. The write changed nothing; the
// caller must not retry it, and should stop using the branch's local instance.
var ErrFenced = errs.ErrFenced

// ErrNodeLost is returned (wrapped, with ErrFenced) by a heartbeat that found
// this node's registration gone (registered again elsewhere, or declared dead),
// and from then on by every write the registration fences, until the node
// registers again.
var ErrNodeLost = errs.ErrNodeLost

// ErrLost is returned (wrapped, with ErrFenced) by a fenced write to a branch row
// the janitor declared lost: its node was declared dead, and the data is on that
// node if anywhere. Any node may delete the row; none may change it.
var ErrLost = errs.ErrLost

// ErrRolledBack is returned (wrapped) by a heartbeat, and with ErrUnavailable by
// a write this node's registration fences, when the catalog no longer has the
// registration although no other process took the node's place: its row is
// missing, or at an epoch this process itself wrote before. A failover to an
// asynchronous standby that had not received the registration does that. The
// registration is not lost: Reregister makes it the node's again.
var ErrRolledBack = errors.New("the catalog lost this node's registration")

var errNodeLost = fmt.Errorf("%w: %w", ErrNodeLost, ErrFenced)
