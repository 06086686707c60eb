package runtime

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Binaries locates Postgres programs. The zero value searches pg_config's bindir and
// /usr/lib/postgresql/<major>/bin. Safe for concurrent use.
type Binaries struct {
	// Dir, when set, is used for every version (the --pg-bin flag).
	Dir string
}

// Find returns the directory holding postgres and initdb for the major version
// (e.g. "15"); version "" means whichever pg_config reports, else the newest installed.
func (b Binaries) Find(version string) (string, error) {
	if b.Dir != "" {
		if err := hasServer(b.Dir); err != nil {
			return "", err
		}
		return b.Dir, nil
	}
	if dir, ver := pgConfigBindir(); dir != "" && (version == "" || ver == version) && hasServer(dir) == nil {
		return dir, nil
	}
	if version != "" {
		dir := filepath.Join("/usr/lib/postgresql", version, "bin")
		if err := hasServer(dir); err != nil {
			return "", fmt.Errorf("no PostgreSQL %s server binaries: install postgresql-%s or pass --pg-bin", version, version)
		}
		return dir, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/postgres")
	if len(matches) == 0 {
		return "", errors.New("no PostgreSQL server binaries found: install postgresql (the server package) or pass --pg-bin")
	}
	// The newest major version, compared as numbers ("16" after "9.6").
	slices.SortFunc(matches, func(a, b string) int { return cmp.Compare(majorOf(a), majorOf(b)) })
	return filepath.Dir(matches[len(matches)-1]), nil
}

func hasServer(dir string) error {
	for _, p := range []string{"postgres", "initdb"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("%s has no %s: pass --pg-bin with the directory of the PostgreSQL server binaries", dir, p)
		}
	}
	return nil
}

// pgConfigBindir asks pg_config for its bindir and major version.
func pgConfigBindir() (dir, major string) {
	out, err := exec.Command("pg_config", "--bindir", "--version").Output()
	if err != nil {
		return "", ""
	}
	lines := strings.Split(string(bytes.TrimSpace(out)), "\n")
	if len(lines) < 2 {
		return "", ""
	}
	dir = strings.TrimSpace(lines[0])
	// "PostgreSQL 15.18 (Debian ...)"
	f := strings.Fields(lines[1])
	if len(f) >= 2 {
		major, _, _ = strings.Cut(f[1], ".")
	}
	return dir, major
}

// majorOf reads the version directory of /usr/lib/postgresql/<v>/bin/postgres as a number.
func majorOf(path string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(path))), 64)
	return v
}

// DataDirVersion reads the major version from dir/PG_VERSION.
func DataDirVersion(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "PG_VERSION"))
	if err != nil {
		return "", fmt.Errorf("%s is not a PostgreSQL data directory: %w", dir, err)
	}
	return strings.TrimSpace(string(b)), nil
}
