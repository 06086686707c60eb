package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// Server settings are written by the node that adds the source or holds the
// branch, from what it knows (a branch's creation time), so their writes are
// fenced by the node row like a source's (nodeFence): a process whose
// registration is gone could otherwise replace the settings of a newer branch of
// the same name with those of the one it remembers.

// SetServerSettings records the settings of a source (branch "") or of one branch,
// identified by its name and creation time so that a later branch of the same name
// does not inherit them.
func (c *Catalog) SetServerSettings(ctx context.Context, source, branch string, branchCreated time.Time, s ServerSettings) (err error) {
	defer c.check(&err)
	cond, args, err := c.nodeFence(false)
	if err != nil {
		return err
	}
	created := int64(0)
	if branch != "" {
		created = unixNano(branchCreated)
	}
	// INSERT ... SELECT so that the fence is in the statement; the WHERE also
	// keeps SQLite from reading ON CONFLICT as a join's.
	res, err := c.exec(ctx, `INSERT INTO server_settings (source, branch, branch_created, image, memory_bytes, cpus, pids)
		SELECT ?, ?, ?, ?, ?, ?, ? WHERE 1 = 1`+cond+`
		ON CONFLICT (source, branch) DO UPDATE SET branch_created = excluded.branch_created, image = excluded.image,
			memory_bytes = excluded.memory_bytes, cpus = excluded.cpus, pids = excluded.pids`,
		append([]any{source, branch, created, s.Image, s.MemoryBytes, s.CPUs, s.PIDs}, args...)...)
	if err != nil {
		return err
	}
	return c.fencedNone(ctx, res, false)
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

// ServerSettingsTable is the settings of every source and branch, as
// AllServerSettings read them at once. The zero value is empty.
type ServerSettingsTable map[serverSettingsKey]ServerSettings

type serverSettingsKey struct {
	source, branch string
	created        int64
}

// Of returns the settings of a source (branch "") or a branch, as ServerSettingsOf
// would have; the zero value when there are none.
func (t ServerSettingsTable) Of(source, branch string, branchCreated time.Time) ServerSettings {
	created := int64(0)
	if branch != "" {
		created = unixNano(branchCreated)
	}
	return t[serverSettingsKey{source, branch, created}]
}

// AllServerSettings reads the settings of every source and branch in one query,
// for a listing of them all.
func (c *Catalog) AllServerSettings(ctx context.Context) (_ ServerSettingsTable, err error) {
	defer c.check(&err)
	rows, err := c.query(ctx, `SELECT source, branch, branch_created, image, memory_bytes, cpus, pids FROM server_settings`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	t := ServerSettingsTable{}
	for rows.Next() {
		var k serverSettingsKey
		var s ServerSettings
		if err := rows.Scan(&k.source, &k.branch, &k.created, &s.Image, &s.MemoryBytes, &s.CPUs, &s.PIDs); err != nil {
			return nil, err
		}
		t[k] = s
	}
	return t, rows.Err()
}

// ServerSettingsPatch changes some of a branch's limits; a nil field keeps the
// recorded value.
type ServerSettingsPatch struct {
	MemoryBytes *int64
	CPUs        *float64
	PIDs        *int64
}

// PatchServerSettings changes the fields p sets of the settings of a source
// (branch "") or a branch, in one statement, so that two changes at once each keep
// the other's fields. Settings recorded for an older branch of the same name are
// replaced, as SetServerSettings does, not patched.
func (c *Catalog) PatchServerSettings(ctx context.Context, source, branch string, branchCreated time.Time, p ServerSettingsPatch) (err error) {
	defer c.check(&err)
	cond, args, err := c.nodeFence(false)
	if err != nil {
		return err
	}
	created := int64(0)
	if branch != "" {
		created = unixNano(branchCreated)
	}
	const same = `server_settings.branch_created = excluded.branch_created`
	patched := func(col, typ string) string {
		return fmt.Sprintf(`CASE WHEN %s THEN COALESCE(CAST(? AS %s), server_settings.%s) ELSE excluded.%s END`, same, typ, col, col)
	}
	res, err := c.exec(ctx, `INSERT INTO server_settings (source, branch, branch_created, image, memory_bytes, cpus, pids)
		SELECT ?, ?, ?, '', COALESCE(CAST(? AS BIGINT), 0), COALESCE(CAST(? AS DOUBLE PRECISION), 0), COALESCE(CAST(? AS BIGINT), 0)
		WHERE 1 = 1`+cond+`
		ON CONFLICT (source, branch) DO UPDATE SET
			image = CASE WHEN `+same+` THEN server_settings.image ELSE excluded.image END,
			memory_bytes = `+patched("memory_bytes", "BIGINT")+`,
			cpus = `+patched("cpus", "DOUBLE PRECISION")+`,
			pids = `+patched("pids", "BIGINT")+`,
			branch_created = excluded.branch_created`,
		append(append([]any{source, branch, created, p.MemoryBytes, p.CPUs, p.PIDs}, args...), p.MemoryBytes, p.CPUs, p.PIDs)...)
	if err != nil {
		return err
	}
	return c.fencedNone(ctx, res, false)
}
