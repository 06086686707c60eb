package branches

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"go.uber.org/zap"
)

// A branch server writes its log, postgres.log in the branch's directory, through
// a descriptor opened with O_APPEND, outside the branch's layer and so outside its
// quota: a server told to log every statement would fill the disk every branch
// shares. The reaper keeps each running server's log near Config.ServerLogMax: past
// it, the log is copied to postgres.log.1 (replacing the older copy) and emptied
// in place, and the server's next write lands at its start, as logrotate's
// copytruncate does. A line written between the copy and the truncation is lost.

// rotateLog rotates the log at path when it is longer than max, and reports whether
// it did. The log is emptied even when its copy cannot be written (a full disk):
// the disk comes before the log.
func rotateLog(path string, max int64) (bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && (max <= 0 || fi.Size() <= max) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	cerr := copyLog(path, path+".1")
	if err := os.Truncate(path, 0); err != nil {
		return false, errors.Join(cerr, err)
	}
	return true, cerr
}

// copyLog replaces old with a copy of path's contents.
func copyLog(path, old string) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := old + ".tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, old)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("keep the server log's older part: %w", err)
	}
	return nil
}

// rotateServerLogs rotates the logs of the running branch servers that outgrew
// Config.ServerLogMax.
func (m *Manager) rotateServerLogs() {
	if m.cfg.ServerLogMax <= 0 {
		return
	}
	type running struct {
		name string
		log  string
	}
	var todo []running
	m.mu.Lock()
	for _, b := range m.branches {
		if b.inst != nil && b.rec.ID != 0 {
			todo = append(todo, running{b.rec.Name, m.layoutOf(b.rec.ID).log})
		}
	}
	m.mu.Unlock()
	for _, r := range todo {
		rotated, err := rotateLog(r.log, m.cfg.ServerLogMax)
		if err != nil {
			m.log.Warn("rotate a branch server's log", zap.String("branch", r.name), zap.Error(err))
		}
		if rotated {
			m.log.Info("branch server log rotated", zap.String("branch", r.name), zap.String("older", r.log+".1"))
		}
	}
}
