package branches

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/pgbranchproxy/pgbranchproxy/branches/dbdiff"
	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
)

// BuildOptions are how a source's seeds are built, kept with the source so that a
// refresh builds the next generation the same way.
type BuildOptions struct {
	// Mask is SQL run in the source's database after loading and before settling;
	// the seed then keeps no trace of the values it changed (see seed.Builder).
	Mask string `json:"mask,omitempty"`
	// KeepOwners restores a dump's owners and privileges (default: --no-owner --no-privileges).
	KeepOwners bool `json:"keep_owners,omitempty"`
	// Jobs is pg_restore's -j for custom and directory archives; 0: one per CPU.
	Jobs int `json:"jobs,omitempty"`
}

func (o BuildOptions) encode() string {
	if o == (BuildOptions{}) {
		return ""
	}
	b, _ := json.Marshal(o)
	return string(b)
}

func (o *BuildOptions) decode(s string) error {
	if s == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(s), o); err != nil {
		return fmt.Errorf("source build options %q: %w", s, err)
	}
	return nil
}

// checkDump makes DumpPath absolute and checks that it is a pg_dump archive.
func (req *SourceRequest) checkDump() error {
	abs, err := filepath.Abs(req.DumpPath)
	if err != nil {
		return err
	}
	if _, err := seed.DumpFormat(abs); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	req.DumpPath = abs
	if req.Database == "" {
		req.Database = req.Name
	}
	return nil
}

// snapshotFile is where a seed generation's schema and tables are kept, next to its
// data directory.
func snapshotFile(seedDir string) string {
	return filepath.Join(filepath.Dir(seedDir), "snapshot.json")
}

func writeSnapshot(seedDir string, snap dbdiff.Snapshot) error {
	b, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	if err := os.WriteFile(snapshotFile(seedDir), b, 0o600); err != nil {
		return fmt.Errorf("write seed snapshot: %w", err)
	}
	return nil
}

func readSnapshot(seedDir string) (dbdiff.Snapshot, error) {
	b, err := os.ReadFile(snapshotFile(seedDir))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("%w: this seed generation was built without a schema record: refresh the source", ErrInvalid)
		}
		return nil, err
	}
	var snap dbdiff.Snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("read seed snapshot: %w", err)
	}
	return snap, nil
}
