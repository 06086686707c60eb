package seed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// removeSlots removes the replication slots a copied data directory dir brought
// (a standby's physical slot, a CDC tool's logical one), before any server starts
// on it. Their consumers never connect to a seed or a branch, and every branch
// would keep all WAL from the slot's restart point, and for a logical slot the
// catalog's dead rows, for good. They go as files rather than with
// pg_drop_replication_slot: a server does not start on a logical slot unless its
// wal_level is logical, nor on more slots than its max_replication_slots, and the
// copy's configuration need not say what the cluster ran with (Debian's is in
// /etc, or it came from the command line).
func removeSlots(dir string, progress func(string)) error {
	slots := filepath.Join(dir, "pg_replslot")
	entries, err := os.ReadDir(slots)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".tmp") {
			progress(fmt.Sprintf("dropping the replication slot %q of the copied cluster", e.Name()))
		}
		if err := os.RemoveAll(filepath.Join(slots, e.Name())); err != nil {
			return fmt.Errorf("drop replication slot %q: %w", e.Name(), err)
		}
	}
	return nil
}
