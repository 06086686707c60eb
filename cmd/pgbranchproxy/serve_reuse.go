package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// reuseFlags are serve's flags for keeping forked processes ready: reused server
// sessions and warm pools of branches.
type reuseFlags struct {
	reuse             string
	maxIdleServers    int
	serverIdleTimeout time.Duration
	serverLifetime    time.Duration
	warm              int
	warmUsers         []string
}

func (f *reuseFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.reuse, "reuse", "on", "reuse server sessions that clients leave idle: reset them (DISCARD ALL) and hand them to the next client with the same startup parameters (on or off)")
	fl.IntVar(&f.maxIdleServers, "max-idle-servers", 8, "idle server sessions kept per branch for reuse")
	positiveDurationVar(fl, &f.serverIdleTimeout, "server-idle-timeout", time.Minute, "close a parked server session after this long unused")
	durationVar(fl, &f.serverLifetime, "server-lifetime", time.Hour, "close a server session when its client leaves once its backend is this old, instead of reusing it (0: no limit)")
	fl.IntVar(&f.warm, "warm", 0, "branches of each source's newest seed kept created and running for new branch names to claim (per source: source add/set --warm)")
	fl.StringSliceVar(&f.warmUsers, "warm-user", nil, "users (USER or USER@DATABASE) whose server sessions pooled branches open ahead of their first client")
}

func (f *reuseFlags) validate() error {
	if f.reuse != "on" && f.reuse != "off" {
		return fmt.Errorf("--reuse must be on or off, not %q", f.reuse)
	}
	if f.maxIdleServers < 0 || f.warm < 0 || f.serverLifetime < 0 {
		return fmt.Errorf("--max-idle-servers, --warm and --server-lifetime cannot be negative")
	}
	return nil
}

// idleServers is how many sessions a branch parks: none with reuse off.
func (f *reuseFlags) idleServers() int {
	if f.reuse == "off" {
		return 0
	}
	return f.maxIdleServers
}
