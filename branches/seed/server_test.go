package seed_test

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/seed"
)

func TestServerSettings(t *testing.T) {
	t.Parallel()
	got := seed.ServerSettings("/run/x/pg_hba.conf", "/run/x/pg_ident.conf")
	want := map[string]string{
		"hba_file":     "/run/x/pg_hba.conf",
		"ident_file":   "/run/x/pg_ident.conf",
		"ssl":          "off",
		"archive_mode": "off",
	}
	if !maps.Equal(got, want) {
		t.Errorf("ServerSettings = %v, want %v", got, want)
	}
	// Each call returns a map of its own, which callers add to.
	got["wal_recycle"] = "off"
	if again := seed.ServerSettings("a", "b"); len(again) != len(want) {
		t.Errorf("ServerSettings shares its map between calls: %v", again)
	}
}

func TestWriteTrustHBA(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		prepare  func(dir string) error
		readable bool // both files end up world-readable
	}{
		{"fresh directory", func(string) error { return nil }, true},
		// The old files keep their mode: see the report on WriteTrustHBA and umask.
		{"overwrites old files", func(dir string) error {
			if err := os.WriteFile(filepath.Join(dir, "pg_hba.conf"), []byte("host all all 0.0.0.0/0 trust\n"), 0o600); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, "pg_ident.conf"), []byte("map sys pg\n"), 0o600)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := tc.prepare(dir); err != nil {
				t.Fatal(err)
			}
			hba, ident, err := seed.WriteTrustHBA(dir)
			if err != nil {
				t.Fatalf("WriteTrustHBA: %v", err)
			}
			if hba != filepath.Join(dir, "pg_hba.conf") || ident != filepath.Join(dir, "pg_ident.conf") {
				t.Errorf("WriteTrustHBA = %q, %q", hba, ident)
			}
			b, err := os.ReadFile(hba)
			if err != nil {
				t.Fatal(err)
			}
			const want = "# written by pgbranchproxy: only the proxy can reach this server's socket\nlocal all all trust\n"
			if string(b) != want {
				t.Errorf("hba file = %q, want %q", b, want)
			}
			b, err = os.ReadFile(ident)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != 0 {
				t.Errorf("ident file = %q, want empty", b)
			}
			// Postgres, running as an unprivileged user, must be able to read both.
			for _, p := range []string{hba, ident} {
				if !tc.readable {
					break
				}
				if st, err := os.Stat(p); err != nil || st.Mode().Perm()&0o004 == 0 {
					t.Errorf("%s is not world-readable: %v %v", p, st.Mode(), err)
				}
			}
		})
	}
}

func TestWriteTrustHBAMissingDir(t *testing.T) {
	t.Parallel()
	if _, _, err := seed.WriteTrustHBA(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("WriteTrustHBA into a missing directory succeeded")
	}
}
