package main

import (
	"database/sql"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	_ "modernc.org/sqlite" // reads the catalog's row counts
)

// sample is one measurement of serve and what it runs.
type sample struct {
	phase       string // start, load, end (load stopped), quiet (after quiesce)
	at          time.Duration
	fds         int
	goroutines  int
	rss         int64
	mounts      int
	postmasters int
	catalog     int64 // bytes of catalog.db and its WAL
	transitions int64 // rows of the transitions log
	branchRows  int64
	sessions    int
	err         string
}

// recorder keeps the samples.
type recorder struct {
	srv     *serve
	mu      sync.Mutex
	samples []sample
}

// sample measures now and prints the line.
func (r *recorder) sample(phase string, at time.Duration) {
	s := sample{phase: phase, at: at.Round(time.Second)}
	pid := r.srv.cmd.Process.Pid
	s.fds, s.rss = openFDs(pid), rssBytes(pid)
	s.mounts, s.postmasters = countMounts(r.srv.state), len(postmastersUnder(r.srv.state))
	cat := filepath.Join(r.srv.state, "catalog.db")
	s.catalog = fileSize(cat) + fileSize(cat+"-wal")
	m, err := promValues("http://"+r.srv.metrics+"/metrics", "go_goroutines", "pgbranch_sessions")
	if err != nil {
		s.err = err.Error()
	}
	s.goroutines, s.sessions = int(m["go_goroutines"]), int(m["pgbranch_sessions"])
	if err := countRows(cat, &s.transitions, &s.branchRows); err != nil && s.err == "" {
		s.err = err.Error()
	}
	r.mu.Lock()
	r.samples = append(r.samples, s)
	r.mu.Unlock()
	fmt.Printf("soak: %-5s %6s  fds %4d  goroutines %5d  rss %4d MiB  mounts %3d  postmasters %3d  catalog %6d KiB (%d transitions, %d branches)  sessions %3d %s\n",
		s.phase, s.at, s.fds, s.goroutines, s.rss>>20, s.mounts, s.postmasters, s.catalog>>10, s.transitions, s.branchRows, s.sessions, s.err)
}

// countRows reads the row counts of the catalog, read-only.
func countRows(path string, transitions, branches *int64) error {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.QueryRow(`SELECT count(*) FROM transitions`).Scan(transitions); err != nil {
		return fmt.Errorf("count transitions: %w", err)
	}
	return db.QueryRow(`SELECT count(*) FROM branches`).Scan(branches)
}

// print writes the samples as a Markdown table, for docs/reliability.md.
func (r *recorder) print(w io.Writer) {
	fmt.Fprintln(w, "\n| phase | at | open fds | goroutines | RSS MiB | mounts | postmasters | catalog KiB | transitions | branches |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range r.samples {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %d | %d | %d | %d |\n",
			s.phase, s.at, s.fds, s.goroutines, s.rss>>20, s.mounts, s.postmasters, s.catalog>>10, s.transitions, s.branchRows)
	}
	fmt.Fprintln(w)
}
