package main

import (
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// machineLine describes the machine a run measured: CPU, cores, memory, kernel,
// the filesystem of the state directory, the PostgreSQL and PgBouncer versions,
// the load average when the run started, and the date.
func machineLine(e *env, stateDir string) string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		for _, l := range strings.Split(string(b), "\n") {
			if _, err := fmt.Sscanf(l, "MemTotal: %d kB", &kb); err == nil {
				mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
				break
			}
		}
	}
	kernel := strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))
	fs := strings.TrimSpace(output("stat", "-f", "-c", "%T", stateDir))
	pg := strings.TrimSpace(output(filepath.Join(e.pgBin, "postgres"), "--version"))
	bouncer := strings.TrimSpace(strings.SplitN(output(e.pgbouncerBin, "--version"), "\n", 2)[0])
	return fmt.Sprintf("%s, %d cores, %s RAM, Linux %s, state dir on %s, %s, %s, %s, load average at start %s, %s",
		cpu, runtime.NumCPU(), mem, kernel, fs, pg, bouncer, runtime.Version(), loadAvg(), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func output(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "?"
	}
	return string(out)
}

// loadAvg is the 1, 5 and 15 minute load averages.
func loadAvg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	return strings.Join(f[:min(3, len(f))], " ")
}

// binaryLine says which pgbranchproxy was measured: the copy's build time and the
// VCS revision stamped into it, else the git HEAD of the tree it was copied from.
func binaryLine(e *env) string {
	src := filepath.Join(e.binDir, "pgbranchproxy")
	built := "?"
	if st, err := os.Stat(src); err == nil {
		built = st.ModTime().UTC().Format("2006-01-02 15:04 UTC")
	}
	rev, modified := "", ""
	if bi, err := buildinfo.ReadFile(e.proxyBin); err == nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if rev != "" {
		if modified == "true" {
			rev += " with uncommitted changes"
		}
		return fmt.Sprintf("%s, built %s from %s", src, built, rev)
	}
	head := strings.TrimSpace(output("git", "-C", e.binDir, "rev-parse", "--short", "HEAD"))
	dirty := ""
	if strings.TrimSpace(output("git", "-C", e.binDir, "status", "--porcelain", "--untracked-files=no")) != "" {
		dirty = ", tree has uncommitted changes"
	}
	return fmt.Sprintf("%s, built %s (no VCS stamp; git HEAD %s%s)", src, built, head, dirty)
}
