package runtime

import (
	"context"
	"errors"
)

// ErrExited is returned (wrapped) when Postgres exits before it is ready.
var ErrExited = errors.New("postgres exited")

// Spec says how to run one Postgres server.
type Spec struct {
	Name      string            // for logs and cluster_name
	Version   string            // major version of the data directory (PG_VERSION)
	DataDir   string            // PGDATA; owned by the runtime's OS user, mode 0700
	SocketDir string            // private directory for the unix socket; owned by the OS user, mode 0700
	LogFile   string            // where the server's stderr goes
	Settings  map[string]string // -c name=value, on top of the runtime's own
	Env       []string          // extra environment, e.g. LD_PRELOAD
}

// Instance is one running Postgres server.
type Instance interface {
	// PID is the postmaster's process id.
	PID() int
	// SocketPath is the unix socket clients dial.
	SocketPath() string
	// Done is closed when the server has exited.
	Done() <-chan struct{}
	// Stop shuts the server down cleanly (fast shutdown), escalating to immediate
	// shutdown and then SIGKILL if ctx ends first, and waits for it to exit.
	Stop(ctx context.Context) error
}

// Runtime starts Postgres servers.
type Runtime interface {
	// Start starts a server and returns once it accepts connections, or with an
	// error (wrapping ErrExited if it died) when it cannot start or ctx ends.
	Start(ctx context.Context, spec Spec) (Instance, error)
}
