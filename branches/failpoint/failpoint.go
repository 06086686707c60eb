package failpoint

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Points of the engine where a fault can be injected. Catalog transitions are named
// "catalog." and the state just recorded: a fault there strikes after the
// transition is in the catalog and before the next step of the operation; the one
// exception, "catalog.claimed", strikes instead of recording a warm pool claim
// (the branch is the name that claimed it).
const (
	Mount   = "mount"   // before a branch's overlay mount
	Unmount = "unmount" // before a branch's overlay unmount
	PGStart = "pg_ctl"  // before a branch server is started
	PGStop  = "pg_stop" // before a branch server is stopped
	InitDB  = "initdb"  // before a seed is built (the branch is the source's name)
	Usage   = "usage"   // before the owned bytes of a branch are measured
	Roles   = "roles"   // before the roles of a running branch are read
	Fork    = "fork"    // before a running parent's files are copied for a child (the branch is the parent)
	Catalog = "catalog."
)

// ErrInjected is the error an "error" action returns.
var ErrInjected = errors.New("injected fault")

// Action is what happens when a point is hit.
type Action string

// Actions.
const (
	ActError Action = "error" // the step fails with ErrInjected
	ActCrash Action = "crash" // the whole process dies at once (SIGKILL to itself)
	ActKill  Action = "kill"  // the branch's server is killed with SIGKILL; the step goes on
	ActSleep Action = "sleep" // the step waits for the rule's duration, then goes on
)

type rule struct {
	point, branch string // branch "" matches every branch
	act           Action
	sleep         time.Duration
	skip          atomic.Int64 // hits that pass before the rule fires
	left          atomic.Int64 // hits that still fire; negative: unlimited
}

// Set is a parsed list of rules. The zero value and nil fire nothing. Safe for
// concurrent use; the only state that changes after Parse is each rule's count.
type Set struct {
	rules []*rule
}

// Parse reads a specification: rules separated by ";", each
// "point[@branch]=[S>][N*]action", where action is error, crash, kill or
// sleep(DURATION), S hits pass before the rule fires, and N limits it to N hits.
// "" gives nil.
func Parse(spec string) (*Set, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	s := &Set{}
	for _, part := range strings.Split(spec, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		r, err := parseRule(part)
		if err != nil {
			return nil, fmt.Errorf("failpoint %q: %w", part, err)
		}
		s.rules = append(s.rules, r)
	}
	return s, nil
}

func parseRule(text string) (*rule, error) {
	where, what, ok := strings.Cut(text, "=")
	if !ok || where == "" {
		return nil, errors.New("want point[@branch]=[S>][N*]action")
	}
	r := &rule{}
	r.point, r.branch, _ = strings.Cut(where, "@")
	r.left.Store(-1)
	if n, rest, ok := strings.Cut(what, ">"); ok {
		skip, err := strconv.Atoi(n)
		if err != nil || skip < 0 {
			return nil, fmt.Errorf("skip %q: want a non-negative integer", n)
		}
		r.skip.Store(int64(skip))
		what = rest
	}
	if n, rest, ok := strings.Cut(what, "*"); ok {
		count, err := strconv.Atoi(n)
		if err != nil || count < 1 {
			return nil, fmt.Errorf("count %q: want a positive integer", n)
		}
		r.left.Store(int64(count))
		what = rest
	}
	switch {
	case what == string(ActError), what == string(ActCrash), what == string(ActKill):
		r.act = Action(what)
	case strings.HasPrefix(what, "sleep(") && strings.HasSuffix(what, ")"):
		d, err := time.ParseDuration(what[len("sleep(") : len(what)-1])
		if err != nil {
			return nil, err
		}
		r.act, r.sleep = ActSleep, d
	default:
		return nil, fmt.Errorf("action %q: want error, crash, kill or sleep(DURATION)", what)
	}
	return r, nil
}

// Enabled reports whether s has any rule.
func (s *Set) Enabled() bool { return s != nil && len(s.rules) > 0 }

// String lists the rules, for the start-up log.
func (s *Set) String() string {
	if s == nil {
		return ""
	}
	var out []string
	for _, r := range s.rules {
		w := r.point
		if r.branch != "" {
			w += "@" + r.branch
		}
		out = append(out, w+"="+string(r.act))
	}
	return strings.Join(out, ";")
}

// Hit runs the rules for point on branch. pid is the branch server's process id, for
// the kill action (0: none runs). It returns an error wrapping ErrInjected for an
// error action, and nil otherwise.
func (s *Set) Hit(point, branch string, pid int) error {
	if s == nil {
		return nil
	}
	for _, r := range s.rules {
		if r.point != point || (r.branch != "" && r.branch != branch) || !r.take() {
			continue
		}
		switch r.act {
		case ActError:
			return fmt.Errorf("failpoint %s on branch %q: %w", point, branch, ErrInjected)
		case ActCrash:
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // never returns: the signal ends the process
		case ActKill:
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
				waitGone(pid, 5*time.Second)
			}
		case ActSleep:
			time.Sleep(r.sleep)
		}
	}
	return nil
}

// take consumes one hit of r, reporting whether it fires.
func (r *rule) take() bool {
	for {
		n := r.skip.Load()
		if n <= 0 {
			break
		}
		if r.skip.CompareAndSwap(n, n-1) {
			return false
		}
	}
	for {
		n := r.left.Load()
		if n < 0 {
			return true
		}
		if n == 0 {
			return false
		}
		if r.left.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// waitGone waits until pid no longer exists (or is a zombie) or d passes.
func waitGone(pid int, d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if _, rest, ok := strings.Cut(string(b), ") "); ok && strings.HasPrefix(rest, "Z") {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
