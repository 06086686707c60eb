package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freezerRoot is the cgroup v1 freezer hierarchy (the design's section 10: it
// works on the machines the simulation runs on).
const freezerRoot = "/sys/fs/cgroup/freezer"

// freezer is a cgroup of the v1 freezer hierarchy that pauses a whole simulated
// host: a node started in it (member.freezer) and every process it forks, its
// branch servers included, stop at once when it is frozen and go on, unaware,
// when it is thawed, as the processes of a paused VM would.
type freezer struct {
	path string
}

// newFreezer makes the cgroup <run prefix><name>. When the test ends it is
// thawed, whatever is left in it is moved back to the root cgroup, and it is
// removed.
func newFreezer(t *testing.T, name string) *freezer {
	t.Helper()
	f := &freezer{path: filepath.Join(freezerRoot, runPrefix()+name)}
	if err := os.Mkdir(f.path, 0o755); err != nil {
		t.Fatalf("the freezer cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := f.remove(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// add moves the process pid into the cgroup; what it forks after stays there.
func (f *freezer) add(pid int) error {
	return os.WriteFile(filepath.Join(f.path, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
}

// procs lists the processes in the cgroup.
func (f *freezer) procs() []int {
	b, err := os.ReadFile(filepath.Join(f.path, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, s := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(s); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// holds reports whether pid is in the cgroup.
func (f *freezer) holds(pid int) bool { return slices.Contains(f.procs(), pid) }

// freeze pauses every process of the cgroup and waits until the kernel says
// all are frozen.
func (f *freezer) freeze() error { return f.set("FROZEN") }

// thaw lets them run again.
func (f *freezer) thaw() error { return f.set("THAWED") }

func (f *freezer) set(state string) error {
	file := filepath.Join(f.path, "freezer.state")
	if err := os.WriteFile(file, []byte(state), 0); err != nil {
		return fmt.Errorf("freezer %s: %w", state, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, err := os.ReadFile(file)
		if err == nil && strings.TrimSpace(string(b)) == state {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("freezer %s: still %q after 10s (%v)", state, strings.TrimSpace(string(b)), err)
		}
	}
}

// remove thaws the cgroup, moves what is left in it to the root cgroup (a test
// that failed while a node ran in it) and removes it.
func (f *freezer) remove() error {
	return removeFreezer(f.path)
}

// removeFreezer is freezer.remove for a cgroup by its path; sweepLeftovers
// uses it for a crashed run's.
func removeFreezer(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	f := &freezer{path: path}
	errs := []error{f.thaw()}
	for range 100 {
		left := f.procs()
		if len(left) == 0 {
			break
		}
		for _, pid := range left {
			os.WriteFile(filepath.Join(freezerRoot, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Remove(path); err != nil {
		errs = append(errs, fmt.Errorf("remove the freezer cgroup: %w", err))
	}
	return errors.Join(errs...)
}
