package runtime

import (
	"context"
	"errors"
	"io"
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

	// Image is the container image to run the server in; "" means the runtime's
	// default. The process runtime ignores it.
	Image string
	// Limits caps the server's memory, CPU and processes where the runtime can
	// (containers); the zero value is no limit.
	Limits Limits
	// Labels describe the server to whoever lists a runtime's servers (container
	// labels), e.g. the source and branch.
	Labels map[string]string
}

// Limits are the resource caps of one server. Zero fields mean no cap.
type Limits struct {
	MemoryBytes int64   // memory, swap included; the kernel kills a server that needs more
	CPUs        float64 // CPU time as a number of CPUs (0.5 is half of one)
	PIDs        int64   // processes (postmaster, backends, helpers)
}

// IsZero reports whether l caps nothing.
func (l Limits) IsZero() bool { return l == Limits{} }

// Job is a Postgres program run to completion: initdb, pg_basebackup, psql,
// pg_controldata.
type Job struct {
	Version string   // major version whose programs to run
	Image   string   // container image; "" for the runtime's default
	Prog    string   // program name, e.g. "initdb"
	Args    []string // its arguments
	Stdin   io.Reader
	Stdout  io.Writer // standard output; stderr too unless Stderr is set
	Stderr  io.Writer
	// Paths are host files and directories the program reads or writes; container
	// runtimes make them visible at the same path.
	Paths []string
	// Network says the program connects to a server over the network (pg_basebackup).
	Network bool
}

// Runner runs Postgres programs to completion as the runtime's OS user.
type Runner interface {
	// Run runs job and returns an error if it cannot start or exits non-zero.
	Run(ctx context.Context, job Job) error
	// User is the OS user (numeric ids) the programs and servers run as.
	User() OSUser
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
	// Discard ends the server at once (immediate shutdown: no checkpoint), for a
	// server whose files are about to be thrown away, escalating to SIGKILL if ctx
	// ends first, and waits for it to exit.
	Discard(ctx context.Context) error
	// Reload has the server read its configuration files again (SIGHUP to the
	// postmaster, which passes it on to its processes).
	Reload() error
}

// Runtime starts Postgres servers.
type Runtime interface {
	// Start starts a server and returns once it accepts connections, or with an
	// error (wrapping ErrExited if it died) when it cannot start or ctx ends.
	Start(ctx context.Context, spec Spec) (Instance, error)
}
