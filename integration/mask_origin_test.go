package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMaskOriginFiles: a data directory copied from another server (--from-datadir,
// --from-url) carries that server's log files when its logging collector wrote them
// inside it, and those quote rows: statements, and the DETAIL of a failed
// constraint; and pg_stat_statements' file of query texts, which quotes the
// statements it does not normalize (CALL, DO). A masked seed keeps none of them,
// nor does the settle's own server write its log there, whatever the copied
// configuration says.
func TestMaskOriginFiles(t *testing.T) {
	s := startServer(t, newStateDir(t))
	dir, pgdata := scratchCluster(t)
	// The origin logs every statement into pglogs/ inside its data directory and
	// tracks them with pg_stat_statements; the settings are in
	// postgresql.auto.conf, so the copy says so too.
	auto := "logging_collector = on\nlog_directory = 'pglogs'\nlog_statement = 'all'\n" +
		"shared_preload_libraries = 'pg_stat_statements'\n"
	if err := os.WriteFile(filepath.Join(pgdata, "postgresql.auto.conf"), []byte(auto), 0o600); err != nil {
		t.Fatal(err)
	}
	cred := postgresCred(t)
	if err := os.Chown(filepath.Join(pgdata, "postgresql.auto.conf"), int(cred.Uid), int(cred.Gid)); err != nil {
		t.Fatal(err)
	}
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-l", filepath.Join(dir, "log"), "-w", "-o",
		"-c listen_addresses= -c unix_socket_directories="+dir, "start")
	runAsPostgres(t, "psql", "-X", "-h", dir, "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1",
		"-c", "CREATE DATABASE crm", "-c", `\c crm`, "-c", maskSeedSQL, "-c", "CREATE EXTENSION pg_stat_statements",
		"-c", "CREATE PROCEDURE note(p text) LANGUAGE sql AS $$ SELECT 1 $$", "-c", "CALL note('"+planted+"')")
	runAsPostgres(t, "pg_ctl", "-D", pgdata, "-m", "fast", "-w", "stop")
	for _, d := range []string{"pglogs", "pg_stat"} {
		if found := filesHolding(t, filepath.Join(pgdata, d), planted); len(found) == 0 {
			t.Fatalf("control: the origin's %s does not hold the planted value, so the search cannot find it", d)
		}
	}

	maskFile := filepath.Join(dir, "mask.sql")
	os.WriteFile(maskFile, []byte(maskSQL), 0o644)
	s.mustCLI("source", "add", "masked", "--from-datadir", pgdata, "--database", "crm", "--mask", maskFile)
	if found := filesHolding(t, filepath.Join(s.state, "seeds", "masked", "g1"), planted); len(found) > 0 {
		t.Errorf("masked seed still holds the original value in %v", found)
	}
	out, err := s.psql(t, "crm@m1", "SELECT count(*) FROM pg_ls_dir('pglogs', true, false)")
	if err != nil || strings.TrimSpace(out) != "0" {
		t.Errorf("the branch sees log files in pglogs: %q %v", out, err)
	}
	out, err = s.psql(t, "crm@m1", "SELECT count(*) FROM pg_stat_statements WHERE query LIKE '%PLANTED%'")
	if err != nil || out != "0" {
		t.Errorf("the branch's pg_stat_statements quotes the planted value: %q %v", out, err)
	}

	// Without --database the mask runs in the source's name, which the copy does
	// not have: the error says so and lists what it has.
	out, errOut, code := s.cliCode("source", "add", "nodb", "--from-datadir", pgdata, "--mask", maskFile)
	if code != 1 || !strings.Contains(errOut, `database "nodb" does not exist: the mask runs in --database (one of crm, postgres, template1)`) {
		t.Errorf("mask in a missing database: exit %d:\n%s%s", code, out, errOut)
	}
}
