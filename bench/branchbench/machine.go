package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// machineLine describes the machine a run measured: CPU, cores, memory, kernel, the
// filesystem of the state directory, PostgreSQL, Go, the load average when the run
// started and the date, as the main benchmark's machine line does.
func machineLine(stateDir, pgBin string) string {
	cpu := "unknown CPU"
	for _, l := range strings.Split(readFile("/proc/cpuinfo"), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			cpu = strings.TrimSpace(v)
			break
		}
	}
	mem := "?"
	for _, l := range strings.Split(readFile("/proc/meminfo"), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(l, "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
			break
		}
	}
	kernel := strings.TrimSpace(readFile("/proc/sys/kernel/osrelease"))
	fs := strings.TrimSpace(output("stat", "-f", "-c", "%T", stateDir))
	pg := strings.TrimSpace(output(filepath.Join(pgBin, "postgres"), "--version"))
	load := loadAvg()
	return fmt.Sprintf("%s, %d cores, %s RAM, Linux %s, state dir on %s, %s, %s, load average at start %s, %s",
		cpu, runtime.NumCPU(), mem, kernel, fs, pg, runtime.Version(), load, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

// loadAvg is the 1, 5 and 15 minute load averages: other work on the machine shows
// up there.
func loadAvg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
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

// findPGBin returns pg_config --bindir when it has postgres, else the newest
// /usr/lib/postgresql/<major>/bin.
func findPGBin() string {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			return d
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return ""
	}
	return filepath.Dir(matches[len(matches)-1])
}
