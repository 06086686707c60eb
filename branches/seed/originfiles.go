package seed

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
)

// defaultLogDirs are the log_directory defaults of Postgres 10 and later ("log")
// and of earlier releases ("pg_log"): a copied data directory can hold either
// whatever the configuration copied with it says (Debian's lives in /etc).
var defaultLogDirs = []string{"log", "pg_log"}

// logDirectory is the log_directory the seed's server reads from its
// configuration, or "" when it cannot be read.
func (s *server) logDirectory(ctx context.Context, superuser string) string {
	c, err := s.connect(ctx, superuser, "template1")
	if err != nil {
		return ""
	}
	defer c.Close(context.Background())
	var dir string
	if err := c.QueryRow(ctx, "SHOW log_directory").Scan(&dir); err != nil {
		return ""
	}
	return dir
}

// statementStats is where pg_stat_statements keeps its statistics and query texts
// across a shutdown. The texts of the statements it does not normalize (CALL, DO,
// other utility statements) hold their literals, values a mask changed among them;
// the seed's server does not load the library, so it is the origin's file.
const statementStats = "pg_stat/pg_stat_statements.stat"

// removeOriginFiles removes from the data directory dir what another server wrote
// into it that quotes statements and rows, and is no part of the database: its
// logs (removeLogs) and pg_stat_statements' saved texts.
func removeOriginFiles(dir, logDir string) {
	removeLogs(dir, logDir)
	os.Remove(filepath.Join(dir, statementStats))
}

// removeLogs removes from the data directory dir the server log files another
// server wrote into it (a data directory copied with --from-datadir or
// pg_basebackup carries its origin's logs), which quote statements and rows: they
// are no part of the database, and masking cannot reach them. The directories are
// logDir (the configuration's log_directory), the defaults, and those that
// current_logfiles names, each only when it is relative, below dir and not dir
// itself.
func removeLogs(dir, logDir string) {
	dirs := append([]string{logDir}, defaultLogDirs...)
	if f, err := os.Open(filepath.Join(dir, "current_logfiles")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if _, p, ok := strings.Cut(sc.Text(), " "); ok {
				dirs = append(dirs, filepath.Dir(p))
			}
		}
		f.Close()
	}
	os.Remove(filepath.Join(dir, "current_logfiles"))
	for _, d := range dirs {
		if d == "" || filepath.IsAbs(d) {
			continue
		}
		d = filepath.Clean(d)
		if d == "." || d == ".." || strings.HasPrefix(d, "../") {
			continue
		}
		removeLogFiles(dir, d)
	}
}

// removeLogFiles removes the regular files of dir's subdirectory sub. A sub that
// is a symbolic link (to where the origin keeps its logs) loses the link only, and
// one that resolves outside dir is left alone: nothing outside the seed is touched.
func removeLogFiles(dir, sub string) {
	p := filepath.Join(dir, sub)
	if fi, err := os.Lstat(p); err != nil {
		return
	} else if fi.Mode()&os.ModeSymlink != 0 {
		os.Remove(p)
		return
	}
	real, err1 := filepath.EvalSymlinks(p)
	root, err2 := filepath.EvalSymlinks(dir)
	if err1 != nil || err2 != nil || !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return
	}
	entries, _ := os.ReadDir(real)
	for _, e := range entries {
		if e.Type().IsRegular() {
			os.Remove(filepath.Join(real, e.Name()))
		}
	}
}
