package catalog

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ServerSettings is where and with what limits a source's or a branch's servers run:
// the container image and cgroup limits of the Docker runtime. Zero fields inherit
// (a branch from its source, a source from the server's flags).
type ServerSettings struct {
	Image       string
	MemoryBytes int64
	CPUs        float64
	PIDs        int64
}

// SetServerSettings records the settings of a source (branch "") or of one branch,
// identified by its name and creation time so that a later branch of the same name
// does not inherit them.
func (c *Catalog) SetServerSettings(ctx context.Context, source, branch string, branchCreated time.Time, s ServerSettings) (err error) {
	defer c.check(&err)
	created := int64(0)
	if branch != "" {
		created = unixNano(branchCreated)
	}
	_, err = c.exec(ctx, `INSERT INTO server_settings (source, branch, branch_created, image, memory_bytes, cpus, pids)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (source, branch) DO UPDATE SET branch_created = excluded.branch_created, image = excluded.image,
			memory_bytes = excluded.memory_bytes, cpus = excluded.cpus, pids = excluded.pids`,
		source, branch, created, s.Image, s.MemoryBytes, s.CPUs, s.PIDs)
	return err
}

// ServerSettingsOf returns the settings recorded for a source (branch "") or a
// branch; the zero value when there are none.
func (c *Catalog) ServerSettingsOf(ctx context.Context, source, branch string, branchCreated time.Time) (_ ServerSettings, err error) {
	defer c.check(&err)
	created := int64(0)
	if branch != "" {
		created = unixNano(branchCreated)
	}
	var s ServerSettings
	err = c.queryRow(ctx, `SELECT image, memory_bytes, cpus, pids FROM server_settings
		WHERE source = ? AND branch = ? AND branch_created = ?`, source, branch, created).
		Scan(&s.Image, &s.MemoryBytes, &s.CPUs, &s.PIDs)
	if errors.Is(err, sql.ErrNoRows) {
		return ServerSettings{}, nil
	}
	return s, err
}
