package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFromDatadirDropsSlots: a stopped cluster's replication slots (a standby's
// physical one, a CDC tool's logical one) are not the seed's: in every branch
// they would keep all WAL from their restart point and, logical, the catalog's
// dead rows, for a consumer that never comes. The seed has none. The cluster's
// wal_level = logical came from its command line (as a Debian cluster's comes
// from /etc), so the copy does not say it: a server would not start on the
// logical slot.
func TestFromDatadirDropsSlots(t *testing.T) {
	s := startServer(t, newStateDir(t))
	dir, pgdata := scratchCluster(t)
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-l", filepath.Join(dir, "log"), "-w", "-o",
		"-c listen_addresses= -c wal_level=logical -c unix_socket_directories="+dir, "start")
	runAsPostgres(t, "psql", "-X", "-h", dir, "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
		"-c", "CREATE DATABASE app", "-c", `\c app`,
		"-c", "SELECT pg_create_physical_replication_slot('standby1', true)",
		"-c", "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')")
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-m", "fast", "-w", "stop")

	out := s.mustCLI("source", "add", "copy", "--from-datadir", pgdata)
	if !strings.Contains(out, `dropping the replication slot "cdc"`) {
		t.Errorf("the progress does not say the slot is dropped:\n%s", out)
	}
	if got, err := s.psql(t, "app@b1", "SELECT count(*) FROM pg_replication_slots"); err != nil || got != "0" {
		t.Errorf("the branch has replication slots: %q %v\n%s", got, err, out)
	}
	if entries, _ := os.ReadDir(filepath.Join(s.state, "seeds", "copy", "g1", "data", "pg_replslot")); len(entries) != 0 {
		t.Errorf("the seed's pg_replslot holds %v", entries)
	}
	if entries, _ := os.ReadDir(filepath.Join(pgdata, "pg_replslot")); len(entries) != 2 {
		t.Errorf("the cluster's own pg_replslot holds %v, want its two slots", entries)
	}
}
