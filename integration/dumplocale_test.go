package integration

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestFromDumpLocale: an archive of a database with an ICU collation is restored
// into a database with that collation, so that text sorts in branches as it did
// where it was dumped (the cluster's own default, C.UTF-8, sorts "B" before "a").
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
	c := s.connect(t, "intl@r1", "options=-cpgbranch.source=restored")
	defer c.Close(t.Context())
	var got, provider, icu string
	if err := c.QueryRow(t.Context(), order).Scan(&got); err != nil || got != "a A b B" {
		t.Errorf("restored database sorts %q (%v), want %q", got, err, "a A b B")
	}
	err := c.QueryRow(t.Context(), "SELECT datlocprovider::text, coalesce(daticulocale, '') FROM pg_database WHERE datname = 'intl'").Scan(&provider, &icu)
	if err != nil || provider != "i" || icu != "en-US" {
		t.Errorf("restored database: provider %q, ICU locale %q (%v), want i, en-US", provider, icu, err)
	}
}
