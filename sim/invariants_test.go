package sim

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	brt "github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// instance is a running branch server: a postmaster on the data directory of a
// branch (by its catalog id) in a node's state directory.
type instance struct {
	pid    int
	node   string // the host name of the state directory: n1, n2
	branch int64
}

// instances lists the postmasters under the run's directory. Any process of the
// machine's is seen: the nodes share its process ids. A postmaster's child keeps
// its parent's command line until it sets its own title, so a process whose
// parent is also listed is a child, not a second server.
func instances(dir string) ([]instance, error) {
	pms, err := brt.FindPostmasters(dir)
	if err != nil {
		return nil, err
	}
	listed := map[int]bool{}
	for _, p := range pms {
		listed[p.PID] = true
	}
	var out []instance
	for _, p := range pms {
		if listed[parentOf(p.PID)] {
			continue
		}
		// dir/<host>/state/branches/<id>/data
		rel, err := filepath.Rel(dir, p.DataDir)
		if err != nil {
			continue
		}
		parts := strings.Split(rel, string(filepath.Separator))
		if len(parts) < 4 || parts[2] != "branches" {
			continue // a seed build's server
		}
		id, err := strconv.ParseInt(parts[3], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, instance{pid: p.PID, node: parts[0], branch: id})
	}
	return out, nil
}

// duplicates describes every branch with more than one running instance.
func duplicates(in []instance) []string {
	by := map[int64][]instance{}
	for _, i := range in {
		by[i.branch] = append(by[i.branch], i)
	}
	var out []string
	for id, is := range by {
		if len(is) > 1 {
			out = append(out, fmt.Sprintf("branch %d runs %d instances: %v", id, len(is), is))
		}
	}
	sort.Strings(out)
	return out
}

// sampler checks every 100 ms that no branch runs more than one instance.
type sampler struct {
	stopc   chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples int
	bad     []string
}

func startSampler(dir string) *sampler {
	s := &sampler{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			in, err := instances(dir)
			s.mu.Lock()
			s.samples++
			if err != nil {
				s.bad = append(s.bad, err.Error())
			}
			for _, d := range duplicates(in) {
				s.bad = append(s.bad, time.Now().Format("15:04:05.000")+" "+d)
			}
			s.mu.Unlock()
			select {
			case <-s.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the number of samples and the violations.
func (s *sampler) stop() (int, []string) {
	close(s.stopc)
	<-s.done
	return s.samples, s.bad
}

// assertNothingLeft checks, once every process of the run has been stopped, that
// no mount and no postmaster under dir survived; whatever did is reported and
// removed so that the directory can go.
func assertNothingLeft(t *testing.T, dir string) {
	t.Helper()
	mps := mountsUnder(dir)
	for i := len(mps) - 1; i >= 0; i-- {
		t.Errorf("mount left behind: %s", mps[i])
		syscall.Unmount(mps[i], syscall.MNT_DETACH)
	}
	pms, _ := brt.FindPostmasters(dir)
	for _, p := range pms {
		t.Errorf("postmaster %d left running on %s", p.PID, p.DataDir)
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
	if len(pms) > 0 {
		time.Sleep(500 * time.Millisecond)
	}
}

// parentOf is a process's parent's id, or 0 once it is gone.
func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so read after its ")".
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
