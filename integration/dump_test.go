package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const dumpSeedSQL = `
CREATE ROLE alice NOLOGIN;
CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, total numeric NOT NULL);
INSERT INTO orders SELECT g, 'customer ' || (g % 100), g * 1.5 FROM generate_series(1, 5000) g;
CREATE INDEX orders_customer ON orders (customer);
CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 1000;
ALTER TABLE orders OWNER TO alice;
ALTER DATABASE shop OWNER TO alice;
CREATE ROLE "Mary Smith" NOLOGIN;
CREATE ROLE reader NOLOGIN;
GRANT SELECT ON orders TO "Mary Smith", reader;
ALTER VIEW big_orders OWNER TO "Mary Smith";
`

// TestFromDump: pg_dump archives in the three formats pg_restore reads become
// sources, restored without owners by default and with them on request, and
// refresh restores the same archive again. With owners, a role that only holds
// privileges is created too, and a role's name may hold a space.
func TestFromDump(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("shop", dumpSeedSQL)
	dir := t.TempDir()
	for _, f := range []struct{ flag, path string }{{"-Fc", "shop.dump"}, {"-Fd", "shop.dir"}, {"-Ft", "shop.tar"}} {
		out, err := exec.Command("pg_dump", f.flag, "-f", filepath.Join(dir, f.path), s.dsn("shop@main")).CombinedOutput()
		if err != nil {
			t.Fatalf("pg_dump %s through the proxy: %v\n%s", f.flag, err, out)
		}
	}

	for _, tc := range []struct {
		source, archive, format string
		extra                   []string
		owner, viewOwner        string
		grants                  int
	}{
		{"fromcustom", "shop.dump", "custom", []string{"--jobs", "2"}, "postgres", "postgres", 0},
		{"fromdir", "shop.dir", "directory", []string{"--jobs", "2"}, "postgres", "postgres", 0},
		{"fromtar", "shop.tar", "tar", []string{"--keep-owners"}, "alice", "Mary Smith", 1},
	} {
		t.Run(tc.source, func(t *testing.T) {
			args := append([]string{"source", "add", tc.source, "--from-dump", filepath.Join(dir, tc.archive)}, tc.extra...)
			out := s.mustCLI(args...)
			if !strings.Contains(out, "restoring "+tc.format+" archive") || !strings.Contains(out, "pg_restore: creating TABLE") {
				t.Errorf("no streamed restore progress:\n%s", out)
			}
			if tc.format != "tar" && !strings.Contains(out, "(2 jobs)") {
				t.Errorf("%s archive not restored in parallel:\n%s", tc.format, out)
			}
			got, err := s.psql(t, tc.source+"@b1", `SELECT count(*), count(DISTINCT customer), (SELECT count(*) FROM big_orders),
				(SELECT tableowner FROM pg_tables WHERE tablename = 'orders'),
				(SELECT count(*) FROM pg_indexes WHERE indexname = 'orders_customer'),
				(SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()),
				(SELECT viewowner FROM pg_views WHERE viewname = 'big_orders'),
				(SELECT count(*) FROM information_schema.role_table_grants WHERE grantee = 'reader') FROM orders`)
			want := fmt.Sprintf("5000|100|4334|%s|1|%s|%s|%d", tc.owner, tc.owner, tc.viewOwner, tc.grants)
			if err != nil || got != want {
				t.Fatalf("restored %s: got %q (%v), want %q\n%s", tc.source, got, err, want, s.logs())
			}
		})
	}

	t.Run("RefreshRestoresAgain", func(t *testing.T) {
		out := s.mustCLI("source", "refresh", "fromtar")
		if !strings.Contains(out, "generation 2") || !strings.Contains(out, "restoring tar archive") {
			t.Fatalf("refresh: %s", out)
		}
		if got, err := s.psql(t, "fromtar@b2", "SELECT count(*) FROM orders"); err != nil || got != "5000" {
			t.Fatalf("%q %v", got, err)
		}
	})

	t.Run("NotAnArchive", func(t *testing.T) {
		plain := filepath.Join(dir, "plain.sql")
		os.WriteFile(plain, []byte("CREATE TABLE x (id int);\n"), 0o644)
		out, err := s.cli("source", "add", "plain", "--from-dump", plain)
		if err == nil || !strings.Contains(out, "--from-sql") {
			t.Fatalf("a plain SQL file as --from-dump: %v\n%s", err, out)
		}
	})
}
