package integration

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// planted is an original value that masking must remove from every byte of the seed.
const planted = "PLANTED-ORIGINAL-7f3a9c51@example.org"

const maskSeedSQL = `
CREATE TABLE customers (id int PRIMARY KEY, email text NOT NULL, note text);
INSERT INTO customers SELECT g, CASE WHEN g % 3 = 0 THEN '` + planted + `' ELSE 'c' || g || '@example.org' END, 'note ' || g
  FROM generate_series(1, 3000) g;
CREATE INDEX customers_email ON customers (email);
-- Statistics that hold the value as a most common value before masking.
ANALYZE customers;
`

const maskSQL = `UPDATE customers SET email = 'user' || id || '@masked.invalid';`

// filesHolding lists the files under dir whose bytes contain s.
func filesHolding(t *testing.T, dir, s string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(s)) {
			found = append(found, strings.TrimPrefix(p, dir+"/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestMask: a source added with --mask keeps no trace of the values the masking
// changed in any file of its seed (heap, indexes, statistics, free space, WAL), and
// a refresh masks again. The same data without --mask is the control: there the
// value is found.
func TestMask(t *testing.T) {
	s := startServer(t, newStateDir(t))
	dir := filepath.Dir(s.state)
	sqlFile, maskFile := filepath.Join(dir, "crm.sql"), filepath.Join(dir, "mask.sql")
	os.WriteFile(sqlFile, []byte(maskSeedSQL), 0o644)
	os.WriteFile(maskFile, []byte(maskSQL), 0o644)

	s.mustCLI("source", "add", "raw", "--from-sql", sqlFile, "--database", "crm")
	if found := filesHolding(t, filepath.Join(s.state, "seeds", "raw", "g1"), planted); len(found) == 0 {
		t.Fatal("control: the unmasked seed does not hold the planted value, so the search cannot find it")
	}

	out := s.mustCLI("source", "add", "masked", "--from-sql", sqlFile, "--database", "crm", "--mask", maskFile)
	if !strings.Contains(out, "masking: ANALYZE and VACUUM FULL in crm") {
		t.Errorf("no masking progress:\n%s", out)
	}
	assertMasked := func(g string) {
		t.Helper()
		if found := filesHolding(t, filepath.Join(s.state, "seeds", "masked", g), planted); len(found) > 0 {
			t.Errorf("masked seed %s still holds the original value in %v", g, found)
		}
	}
	assertMasked("g1")
	// The file changes after add: the source keeps the SQL it was given.
	os.WriteFile(maskFile, []byte("SELECT 1;"), 0o644)
	out = s.mustCLI("source", "refresh", "masked")
	if !strings.Contains(out, "generation 2") || !strings.Contains(out, "masking:") {
		t.Fatalf("refresh did not mask again:\n%s", out)
	}
	assertMasked("g2")
	c := s.connect(t, "crm@m1", "options=-cpgbranch.source=masked")
	var n, masked int
	var email string
	err := c.QueryRow(t.Context(), `SELECT count(*), count(*) FILTER (WHERE email LIKE '%@masked.invalid'),
		(SELECT email FROM customers WHERE email = 'user3@masked.invalid') FROM customers`).Scan(&n, &masked, &email)
	if err != nil || n != 3000 || masked != 3000 || email != "user3@masked.invalid" {
		t.Fatalf("masked branch: %d %d %q %v", n, masked, email, err)
	}
	c.Close(t.Context())
	s.mustCLI("branch", "destroy", "m1")

	// A mask that fails on a row: the error says where, and quotes no row (a
	// DETAIL would: "Failing row contains (3, null, ...)") into the CLI's output,
	// the audit log or the server's log.
	os.WriteFile(maskFile, []byte("SELECT 1;\nUPDATE customers SET email = NULL WHERE email = '"+planted+"';"), 0o644)
	out, errOut, code := s.cliCode("source", "add", "badmask", "--from-sql", sqlFile, "--database", "crm", "--mask", maskFile)
	if code != 1 || !strings.Contains(errOut, "line 2") || !strings.Contains(errOut, "not-null") {
		t.Errorf("failed mask: exit %d, want 1 and the line and error:\n%s%s", code, out, errOut)
	}
	audit := s.mustCLI("audit", "ls")
	for where, text := range map[string]string{"the CLI": out + errOut, "the audit log": audit, "the server's log": s.logs()} {
		if strings.Contains(text, planted) || strings.Contains(text, "Failing row") {
			t.Errorf("%s quotes a row of the failed mask:\n%s", where, text)
		}
	}
}
