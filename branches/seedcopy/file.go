package seedcopy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile stores m as JSON at path, atomically: it writes and syncs a temporary
// file beside it, renames it over path and syncs the directory.
func WriteFile(path string, m Manifest) error {
	if m.Entries == nil {
		m.Entries = []Entry{}
	}
	b, err := json.MarshalIndent(m, "", "\t")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write manifest %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// ReadFile reads a manifest written by WriteFile and validates it; a manifest that
// does not parse or is not valid is an error wrapping ErrCorrupt.
func ReadFile(path string) (Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: manifest %s: %v", ErrCorrupt, path, err)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, fmt.Errorf("manifest %s: %w", path, err)
	}
	return m, nil
}
