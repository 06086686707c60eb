package branches

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// onlineCopy copies dir, a directory of a running branch server (its upper layer
// for a fork, its merged data directory for a seed), into dst between
// pg_backup_start and pg_backup_stop, then copies pg_wal again so the WAL written
// during the copy is complete, and writes the backup_label (and tablespace_map)
// Postgres needs to recover from the copy. conn is a superuser session on that
// server; the server keeps running and its sessions are not disturbed.
//
// The server goes on checkpointing during the copy (on its own, or for another
// copy's pg_backup_start), and a checkpoint recycles WAL segments older than its
// redo point and unlinks dropped relations' files. A temporary replication slot
// keeps the WAL from the backup's start until pg_wal has been copied again, and
// files that go while they are copied are left out, as pg_basebackup leaves them
// out: replaying the WAL from the backup label accounts for them.
func (m *Manager) onlineCopy(ctx context.Context, conn *pgx.Conn, pgVersion, label, dir, dst string) error {
	major, _ := strconv.Atoi(pgVersion)
	startSQL, stopSQL := "SELECT pg_backup_start($1, true)", "SELECT labelfile, spcmapfile FROM pg_backup_stop(false)"
	if major < 15 {
		startSQL, stopSQL = "SELECT pg_start_backup($1, true, false)", "SELECT labelfile, spcmapfile FROM pg_stop_backup(false, false)"
	}
	slot, err := reserveWAL(ctx, conn)
	if err != nil {
		m.log.Warn("online copy without a slot: a checkpoint during the copy may recycle WAL it needs",
			zap.String("label", label), zap.Error(err))
	} else {
		defer releaseWAL(ctx, conn, slot)
	}
	if _, err := conn.Exec(ctx, startSQL, label); err != nil {
		return fmt.Errorf("start backup: %w", err)
	}
	if err := copyLive(ctx, dir, dst); err != nil {
		conn.Exec(context.WithoutCancel(ctx), stopSQL)
		return err
	}
	var backupLabel, spcmap string
	if err := conn.QueryRow(ctx, stopSQL).Scan(&backupLabel, &spcmap); err != nil {
		return fmt.Errorf("stop backup: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pg_wal")); err == nil {
		if err := copyLive(ctx, filepath.Join(dir, "pg_wal"), filepath.Join(dst, "pg_wal")); err != nil {
			return err
		}
	}
	removeServerFiles(dst)
	removeCopiedSlots(dst)
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

// reserveWAL creates a temporary physical replication slot on conn's server that
// holds its WAL from now on, and returns the slot's name. The slot goes with the
// session at the latest.
func reserveWAL(ctx context.Context, conn *pgx.Conn) (string, error) {
	var b [8]byte
	rand.Read(b[:])
	slot := copySlotPrefix + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "SELECT pg_create_physical_replication_slot($1, true, true)", slot); err != nil {
		return "", fmt.Errorf("reserve WAL: %w", err)
	}
	return slot, nil
}

// copySlotPrefix begins the name of each slot reserveWAL makes.
const copySlotPrefix = "pgbranch_copy_"

// releaseWAL drops the slot reserveWAL made, so that the server recycles that WAL
// again.
func releaseWAL(ctx context.Context, conn *pgx.Conn, slot string) {
	conn.Exec(context.WithoutCancel(ctx), "SELECT pg_drop_replication_slot($1)", slot)
}
