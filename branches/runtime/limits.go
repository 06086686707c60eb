package runtime

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MinPIDs is the fewest processes a server can run under: the postmaster, its
// background processes (checkpointer, background writer, WAL writer, autovacuum
// launcher, logical replication launcher) and a session. Measured on PostgreSQL
// 15 under Docker's pids limit: under 7 a seed could not be settled (the
// postmaster could not fork the settling session), under 8 it could and a
// branch served one session; each further session takes one more.
const MinPIDs = 8

// The least memory and CPU a container runtime takes (Docker's).
const (
	minMemory = 6 << 20
	minCPUs   = 0.01
)

// Postgres's defaults of the settings MinMemory adds up.
const (
	defaultSharedBuffers      = 128 << 20
	defaultMaintenanceWorkMem = 64 << 20
)

// MinMemory is the least memory limit a server started with settings (its -c
// settings; Postgres's defaults for those not among them) runs under without the
// kernel killing it at its first heavy statement: its shared buffers, which it
// fills as it reads, and one maintenance operation's memory (maintenance_work_mem:
// a CREATE INDEX, a VACUUM). Measured with shared_buffers=16MB: a 48MB limit was
// killed in a CREATE INDEX of 300,000 rows, 96MB was not; with the default 128MB,
// a 24MB limit was killed at the first 60MB table. parts says what it is made of,
// for an error message.
func MinMemory(settings map[string]string) (bytes int64, parts string) {
	given := settingsByName(settings)
	sb := pgMemory(given["shared_buffers"], 8<<10, defaultSharedBuffers)
	mwm := pgMemory(given["maintenance_work_mem"], 1<<10, defaultMaintenanceWorkMem)
	return sb + mwm, fmt.Sprintf("shared_buffers (%s) and maintenance_work_mem (%s)", pgSizeText(sb), pgSizeText(mwm))
}

// Check refuses limits no server started with settings could run under, and
// negative ones; a zero field is no limit. It is for limits before they are
// recorded or a server is started with them: a server under them would fail only
// later, at a session or a heavy statement.
func (l Limits) Check(settings map[string]string) error {
	switch {
	case l.MemoryBytes < 0:
		return fmt.Errorf("a negative memory limit (%d)", l.MemoryBytes)
	case l.CPUs < 0:
		return fmt.Errorf("a negative number of cpus (%g)", l.CPUs)
	case l.PIDs < 0:
		return fmt.Errorf("a negative process limit (%d)", l.PIDs)
	case l.MemoryBytes > 0 && l.MemoryBytes < minMemory:
		return fmt.Errorf("memory limit of %d bytes: at least 6MB", l.MemoryBytes)
	case l.CPUs > 0 && l.CPUs < minCPUs:
		return fmt.Errorf("%g cpus: at least %g", l.CPUs, minCPUs)
	case l.PIDs > 0 && l.PIDs < MinPIDs:
		return fmt.Errorf("a limit of %d processes: a branch server needs at least %d (the postmaster, its background processes and one session), and one more for each further session", l.PIDs, MinPIDs)
	}
	if need, parts := MinMemory(settings); l.MemoryBytes > 0 && l.MemoryBytes < need {
		return fmt.Errorf("a memory limit of %s: a branch server needs at least %s, its %s, or the kernel kills it once its buffers fill; "+
			"give more, or lower them with serve's --pg-setting", pgSizeText(l.MemoryBytes), pgSizeText(need), parts)
	}
	return nil
}

// settingsByName returns settings under the names Postgres reads them by: it
// takes -c SHARED_BUFFERS=1GB or -c shared-buffers=1GB for shared_buffers. Of
// names that are one setting, the last on the server's command line (settings
// in name order) wins, as it does there.
func settingsByName(settings map[string]string) map[string]string {
	out := make(map[string]string, len(settings))
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		out[strings.ReplaceAll(strings.ToLower(strings.TrimSpace(k)), "-", "_")] = settings[k]
	}
	return out
}

// pgMemory reads a Postgres memory setting as Postgres does: a number with a unit
// (B, kB, MB, GB, TB; space between them allowed, fractions rounded to bytes) or
// without one, in the setting's own unit (unit bytes). "" or a value Postgres
// would refuse gives def: the server would not start with it anyway, and says why.
func pgMemory(v string, unit, def int64) int64 {
	v = strings.TrimSpace(v)
	if v == "" {
		return def
	}
	num := strings.TrimRight(v, "BkMGT ")
	suffix := strings.TrimSpace(v[len(num):])
	mult := map[string]int64{"": unit, "B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}[suffix]
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if mult == 0 || err != nil || n < 0 {
		return def
	}
	return int64(n * float64(mult))
}

// pgSizeText writes n bytes in the largest unit Postgres takes that writes it
// whole, or in MB to a tenth (128MB, 1.5GB).
func pgSizeText(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "MB"
	}
	return strconv.FormatInt(n, 10) + "B"
}
