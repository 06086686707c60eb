package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// procSample is one measurement of one process the soak started.
type procSample struct {
	fds, goroutines int
	rss             int64
}

// sample is one measurement of the system and what it runs.
type sample struct {
	phase       string // start, load, end (load stopped), quiet (after quiesce)
	at          time.Duration
	procs       []procSample // in the order of system.procs
	mounts      int          // over every node's state directory
	postmasters int
	catalog     catalogStats
	catalogRead time.Duration // to connect to the catalog and read its counts
	sessions    int           // open client sessions, as the nodes count them
	err         string
}

// recorder keeps the samples.
type recorder struct {
	sys     *system
	mu      sync.Mutex
	samples []sample
}

// sample measures now and prints the line.
func (r *recorder) sample(phase string, at time.Duration) {
	s := sample{phase: phase, at: at.Round(time.Second)}
	var errs []string
	for _, p := range r.sys.procs {
		pid := p.cmd.Process.Pid
		ps := procSample{fds: openFDs(pid), rss: rssBytes(pid)}
		m, err := promValues("http://"+p.metrics+"/metrics", "go_goroutines", "pgbranch_sessions")
		if err != nil {
			errs = append(errs, p.name+": "+err.Error())
		}
		ps.goroutines = int(m["go_goroutines"])
		if p.admin != nil {
			s.sessions += int(m["pgbranch_sessions"])
		}
		s.procs = append(s.procs, ps)
	}
	for _, n := range r.sys.nodes {
		s.mounts += countMounts(n.state)
		s.postmasters += len(postmastersUnder(n.state))
	}
	var err error
	t := time.Now()
	s.catalog, err = r.sys.cat.stats()
	s.catalogRead = time.Since(t)
	if err != nil {
		errs = append(errs, err.Error())
	}
	s.err = strings.Join(errs, "; ")
	r.mu.Lock()
	r.samples = append(r.samples, s)
	r.mu.Unlock()
	fmt.Printf("soak: %-5s %6s  %s  mounts %3d  postmasters %3d  catalog %6d KiB (%d transitions, %d branches, read in %s)  sessions %3d %s\n",
		s.phase, s.at, r.procLine(s), s.mounts, s.postmasters, s.catalog.bytes>>10, s.catalog.transitions, s.catalog.branches,
		s.catalogRead.Round(time.Millisecond), s.sessions, s.err)
}

// procLine prints the processes' measures, each prefixed by its name when there are
// several.
func (r *recorder) procLine(s sample) string {
	var parts []string
	for i, ps := range s.procs {
		line := fmt.Sprintf("fds %4d  goroutines %5d  rss %4d MiB", ps.fds, ps.goroutines, ps.rss>>20)
		if len(s.procs) > 1 {
			line = r.sys.procs[i].name + " " + line
		}
		parts = append(parts, line)
	}
	return strings.Join(parts, " | ")
}

// print writes the samples as a Markdown table, for docs/reliability.md. With
// several processes, a cell holds one value per process, in the order the header
// names them.
func (r *recorder) print(w io.Writer) {
	names := ""
	if len(r.sys.procs) > 1 {
		var ns []string
		for _, p := range r.sys.procs {
			ns = append(ns, p.name)
		}
		names = " (" + strings.Join(ns, "/") + ")"
	}
	fmt.Fprintf(w, "\n| phase | at | open fds%s | goroutines%s | RSS MiB%s | mounts | postmasters | catalog KiB | transitions | branches |\n", names, names, names)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.samples {
		cell := func(get func(procSample) int64) string {
			var vs []string
			for _, ps := range s.procs {
				vs = append(vs, fmt.Sprint(get(ps)))
			}
			return strings.Join(vs, "/")
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d | %d | %d | %d | %d |\n",
			s.phase, s.at,
			cell(func(p procSample) int64 { return int64(p.fds) }),
			cell(func(p procSample) int64 { return int64(p.goroutines) }),
			cell(func(p procSample) int64 { return p.rss >> 20 }),
			s.mounts, s.postmasters, s.catalog.bytes>>10, s.catalog.transitions, s.catalog.branches)
	}
	fmt.Fprintln(w)
}
