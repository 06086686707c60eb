package branches

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// onlineCopy copies dir, a directory of a running branch server (its upper layer
// for a fork, its merged data directory for a seed), into dst between
// pg_backup_start and pg_backup_stop, then copies pg_wal again so the WAL written
// during the copy is complete, and writes the backup_label (and tablespace_map)
// Postgres needs to recover from the copy. conn is a superuser session on that
// server; the server keeps running and its sessions are not disturbed.
func (m *Manager) onlineCopy(ctx context.Context, conn *pgx.Conn, pgVersion, label, dir, dst string) error {
	major, _ := strconv.Atoi(pgVersion)
	startSQL, stopSQL := "SELECT pg_backup_start($1, true)", "SELECT labelfile, spcmapfile FROM pg_backup_stop(false)"
	if major < 15 {
		startSQL, stopSQL = "SELECT pg_start_backup($1, true, false)", "SELECT labelfile, spcmapfile FROM pg_stop_backup(false, false)"
	}
	if _, err := conn.Exec(ctx, startSQL, label); err != nil {
		return fmt.Errorf("start backup: %w", err)
	}
	if err := copyTree(ctx, dir, dst); err != nil {
		conn.Exec(context.WithoutCancel(ctx), stopSQL)
		return err
	}
	var backupLabel, spcmap string
	if err := conn.QueryRow(ctx, stopSQL).Scan(&backupLabel, &spcmap); err != nil {
		return fmt.Errorf("stop backup: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pg_wal")); err == nil {
		if err := copyTree(ctx, filepath.Join(dir, "pg_wal"), filepath.Join(dst, "pg_wal")); err != nil {
			return err
		}
	}
	removeServerFiles(dst)
	if err := writeOwned(filepath.Join(dst, "backup_label"), backupLabel, m.cfg.User.UID, m.cfg.User.GID); err != nil {
		return err
	}
	if strings.TrimSpace(spcmap) != "" {
		if err := writeOwned(filepath.Join(dst, "tablespace_map"), spcmap, m.cfg.User.UID, m.cfg.User.GID); err != nil {
			return err
		}
	}
	return nil
}
