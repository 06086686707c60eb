package integration

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestFromDumpLocale: an archive of a database with an ICU collation is restored
// into a database with that collation, so that text sorts in branches as it did
// where it was dumped (the cluster's own default, C.UTF-8, sorts "B" before "a").
// It is so too when the archive names a libc locale this host lacks, as one
// dumped where en_US.UTF-8 is installed does.
func TestFromDumpLocale(t *testing.T) {
	s := startServer(t, newStateDir(t))
	s.seedSQL("origin", `
CREATE DATABASE intl LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8' TEMPLATE template0;
\c intl
CREATE TABLE w (x text);
INSERT INTO w VALUES ('a'), ('B'), ('b'), ('A');
CREATE INDEX ON w (x);
`)
	const order = "SELECT string_agg(x, ' ' ORDER BY x) FROM w"
	if out, err := s.psql(t, "intl@main", order); err != nil || out != "a A b B" {
		t.Fatalf("the origin sorts %q (%v), want en-US's order", out, err)
	}
	archive := filepath.Join(t.TempDir(), "intl.dump")
	if out, err := exec.Command("pg_dump", "-Fc", "-f", archive, s.dsn("intl@main")).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	s.mustCLI("source", "add", "restored", "--from-dump", archive, "--database", "intl")
	checkICU(t, s, "restored", "r1", order)

	// A directory archive whose database's libc locale is en_US.UTF-8, which
	// this host does not have: its TOC is rewritten to say so.
	dir := filepath.Join(t.TempDir(), "intl.d")
	if out, err := exec.Command("pg_dump", "-Fd", "-f", dir, s.dsn("intl@main")).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	if _, err := os.Stat("/usr/lib/locale/en_US.utf8"); err == nil {
		t.Log("this host has en_US.UTF-8: the second restore does not need the fallback")
	}
	retocLocale(t, filepath.Join(dir, "toc.dat"), "LOCALE = 'C.UTF-8'", "LOCALE = 'en_US.UTF-8'")
	s.mustCLI("source", "add", "nolibc", "--from-dump", dir, "--database", "intl")
	checkICU(t, s, "nolibc", "n1", order)
}

func checkICU(t *testing.T, s *server, source, branch, order string) {
	t.Helper()
	c := s.connect(t, "intl@"+branch, "options=-cpgbranch.source="+source)
	defer c.Close(t.Context())
	var got, provider, icu string
	if err := c.QueryRow(t.Context(), order).Scan(&got); err != nil || got != "a A b B" {
		t.Errorf("%s: restored database sorts %q (%v), want %q", source, got, err, "a A b B")
	}
	err := c.QueryRow(t.Context(), "SELECT datlocprovider::text, coalesce(daticulocale, '') FROM pg_database WHERE datname = 'intl'").Scan(&provider, &icu)
	if err != nil || provider != "i" || icu != "en-US" {
		t.Errorf("%s: restored database: provider %q, ICU locale %q (%v), want i, en-US", source, provider, icu, err)
	}
}

// retocLocale replaces old with new in the CREATE DATABASE of a directory
// archive's TOC, a string there after its length (pg_dump's WriteInt: a sign
// byte, then four bytes little-endian).
func retocLocale(t *testing.T, toc, old, new string) {
	t.Helper()
	b, err := os.ReadFile(toc)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("CREATE DATABASE intl WITH"))
	if i < 5 {
		t.Fatalf("no CREATE DATABASE in %s", toc)
	}
	n := int(binary.LittleEndian.Uint32(b[i-4 : i]))
	if b[i-5] != 0 || i+n > len(b) || !bytes.Contains(b[i:i+n], []byte(old)) {
		t.Fatalf("the CREATE DATABASE of %s is not as expected: %q", toc, b[i:min(i+n, len(b))])
	}
	defn := bytes.Replace(b[i:i+n], []byte(old), []byte(new), 1)
	out := append(append([]byte{}, b[:i-4]...), binary.LittleEndian.AppendUint32(nil, uint32(len(defn)))...)
	out = append(append(out, defn...), b[i+n:]...)
	if err := os.WriteFile(toc, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
