package roles_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
	"go.uber.org/zap"
)

// startPostgres initdbs and starts a PostgreSQL 15 server as the postgres user in a
// temporary directory, and returns a superuser connection to it. Both end with the test.
func startPostgres(t *testing.T, ctx context.Context) *pgx.Conn {
	t.Helper()
	u, err := runtime.LookupUser("postgres")
	if err != nil {
		t.Fatal(err)
	}
	p := runtime.NewProcess(runtime.Binaries{}, u, zap.NewNop())
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "run")
	for _, d := range []string{data, sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, u.UID, u.GID); err != nil {
			t.Fatal(err)
		}
	}
	cmd, err := p.Command(ctx, "15", "initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-instructions", "--no-sync")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	inst, err := p.Start(ctx, runtime.Spec{Version: "15", DataDir: data, SocketDir: sock, LogFile: filepath.Join(dir, "server.log"),
		Settings: map[string]string{"fsync": "off"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Stop(context.Background()) })
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database = sock, 5432, "postgres", "postgres"
	cfg.Fallbacks = nil
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestRead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL: skipped with -short")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := startPostgres(t, ctx)
	for _, sql := range []string{
		"SET password_encryption = 'scram-sha-256'",
		"CREATE ROLE app LOGIN PASSWORD 'secret'",
		"CREATE ROLE grp NOLOGIN PASSWORD 'secret'",
		"CREATE ROLE nopass LOGIN",
		"CREATE ROLE expired LOGIN PASSWORD 'secret' VALID UNTIL '2001-02-03 04:05:06+00'",
		"CREATE ROLE later LOGIN PASSWORD 'secret' VALID UNTIL '2999-01-01 00:00:00+00'",
		`CREATE ROLE "Mixed Case" LOGIN PASSWORD 'secret'`,
		"SET password_encryption = 'md5'",
		"CREATE ROLE old LOGIN PASSWORD 'secret'",
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	set, err := roles.Read(ctx, conn)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	now := time.Now()
	tests := []struct {
		name       string
		scram, md5 bool
		canLogin   bool
		until      string // RFC 3339, "" for none
		canAuth    bool
		super      bool
	}{
		{"postgres", false, false, true, "", false, true}, // initdb -A trust: no password
		{"app", true, false, true, "", true, false},
		{"grp", true, false, false, "", false, false},
		{"nopass", false, false, true, "", false, false},
		{"expired", true, false, true, "2001-02-03T04:05:06Z", false, false},
		{"later", true, false, true, "2999-01-01T00:00:00Z", true, false},
		{"Mixed Case", true, false, true, "", true, false},
		{"old", false, true, true, "", true, false},
		{"pg_monitor", false, false, false, "", false, false}, // a predefined role
	}
	for _, tc := range tests {
		r, ok := set[tc.name]
		if !ok {
			t.Errorf("role %q not read", tc.name)
			continue
		}
		if r.Name != tc.name || r.CanLogin != tc.canLogin ||
			strings.HasPrefix(r.Password, "SCRAM-SHA-256$") != tc.scram || strings.HasPrefix(r.Password, "md5") != tc.md5 ||
			(r.Password != "") != (tc.scram || tc.md5) {
			t.Errorf("role %q = %+v", tc.name, r)
		}
		switch {
		case tc.until == "" && r.ValidUntil != nil:
			t.Errorf("role %q ValidUntil = %v, want none", tc.name, r.ValidUntil)
		case tc.until != "":
			want, _ := time.Parse(time.RFC3339, tc.until)
			if r.ValidUntil == nil || !r.ValidUntil.Equal(want) || r.ValidUntil.Location() != time.UTC {
				t.Errorf("role %q ValidUntil = %v, want %v in UTC", tc.name, r.ValidUntil, want)
			}
		}
		if r.Superuser == nil || *r.Superuser != tc.super || r.MaySuperuse() != tc.super {
			t.Errorf("role %q Superuser = %v, want %v", tc.name, r.Superuser, tc.super)
		}
		if got := r.CanAuthenticate(now); got != tc.canAuth {
			t.Errorf("role %q CanAuthenticate = %v, want %v", tc.name, got, tc.canAuth)
		}
	}
	// What Read returns survives the catalog's encoding.
	back, err := roles.Decode(set.Encode())
	if err != nil || len(back) != len(set) {
		t.Fatalf("Decode(Encode(Read)) = %d roles, %v; want %d", len(back), err, len(set))
	}
	for name, r := range set {
		if !roleEqual(back[name], r) {
			t.Errorf("role %q after round trip = %+v, want %+v", name, back[name], r)
		}
	}
}
