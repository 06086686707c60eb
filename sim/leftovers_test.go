package sim

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sweepLeftovers removes what a run of the simulation that died without its
// cleanups (killed, or a go test timeout) left: its processes, found by their
// network namespace (after thawing its freezer cgroups: a frozen process cannot
// die), its mounts and temporary directories, then its namespaces.
// A run is over when its process, whose id is in the prefix, is gone; what a
// live run owns is left alone. It returns what it removed.
func sweepLeftovers() []string {
	var done []string
	nss, _ := os.ReadDir("/run/netns")
	var stale []string
	for _, e := range nss {
		if deadRun(e.Name()) {
			stale = append(stale, e.Name())
		}
	}
	cgs, _ := filepath.Glob(filepath.Join(freezerRoot, "pgbsim-*"))
	for _, cg := range cgs {
		if !deadRun(filepath.Base(cg)) {
			continue
		}
		if err := removeFreezer(cg); err != nil {
			done = append(done, err.Error())
			continue
		}
		done = append(done, "freezer cgroup "+cg+" thawed and removed")
	}
	for _, ns := range stale {
		kinds := map[string]int{}
		pids := netnsPIDs(ns)
		for _, pid := range pids {
			kinds[procComm(pid)]++
			killPID(pid)
		}
		if len(pids) > 0 {
			done = append(done, fmt.Sprintf("%d processes in %s killed: %v", len(pids), ns, kinds))
		}
	}
	if len(stale) > 0 {
		time.Sleep(500 * time.Millisecond) // killed processes release their mounts' files
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgbsim-*"))
	for _, d := range dirs {
		if !deadRun(filepath.Base(d)) {
			continue
		}
		mps := mountsUnder(d)
		for i := len(mps) - 1; i >= 0; i-- {
			mp := mps[i]
			syscall.Unmount(mp, syscall.MNT_DETACH)
			done = append(done, "mount "+mp+" removed")
		}
		os.RemoveAll(d)
		done = append(done, "directory "+d+" removed")
	}
	for _, ns := range stale {
		if err := ip("netns", "del", ns); err != nil {
			done = append(done, err.Error())
			continue
		}
		done = append(done, "namespace "+ns+" removed")
	}
	return done
}

// deadRun reports whether name carries the prefix of a run whose process is gone.
func deadRun(name string) bool {
	rest, ok := strings.CutPrefix(name, "pgbsim-")
	if !ok {
		return false
	}
	pidText, _, ok := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid == os.Getpid() {
		return false
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// mountsUnder lists the mount points under dir in this process's mount
// namespace, which the nodes share, in the order they were mounted.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 4 && strings.HasPrefix(fs[4], prefix) {
			out = append(out, fs[4])
		}
	}
	return out
}
