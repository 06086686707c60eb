package seed

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/branches/runtime"
)

// server is a temporary Postgres on a seed being built, reachable only on a private
// socket with trust authentication.
type server struct {
	inst     runtime.Instance
	sockDir  string
	stopOnce sync.Once
	stopErr  error
}

// ServerSettings are the settings every server on a seed or branch data directory
// gets, whatever the copied postgresql.conf says: a branch must never archive into
// its source's archive, nor need the source's certificates.
func ServerSettings(hbaFile, identFile string) map[string]string {
	return map[string]string{
		"hba_file":     hbaFile,
		"ident_file":   identFile,
		"ssl":          "off",
		"archive_mode": "off",
	}
}

// WriteTrustHBA writes an hba file allowing every role over the local socket only,
// and an empty ident file, into dir.
func WriteTrustHBA(dir string) (hba, ident string, err error) {
	hba, ident = filepath.Join(dir, "pg_hba.conf"), filepath.Join(dir, "pg_ident.conf")
	if err := os.WriteFile(hba, []byte("# written by pgbranchproxy: only the proxy can reach this server's socket\nlocal all all trust\n"), 0o644); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(ident, nil, 0o644); err != nil {
		return "", "", err
	}
	// Root writes them, the Postgres user reads them: whatever the umask.
	for _, f := range []string{hba, ident} {
		if err := os.Chmod(f, 0o644); err != nil {
			return "", "", err
		}
	}
	return hba, ident, nil
}

func startServer(ctx context.Context, rt Runtime, work, dataDir, version, image string, extra map[string]string) (*server, error) {
	u := rt.User()
	sockDir := filepath.Join(work, "run")
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chown(sockDir, u.UID, u.GID); err != nil {
		return nil, err
	}
	hba, ident, err := WriteTrustHBA(work)
	if err != nil {
		return nil, err
	}
	settings := ServerSettings(hba, ident)
	// Zero-filled new segments (rather than recycled ones) leave the tail of the
	// last segment all zeros, ready to become a hole.
	settings["wal_recycle"] = "off"
	settings["shared_preload_libraries"] = ""
	// Its log goes to seed.log, outside the data directory, whatever the
	// configuration a copied data directory brought says: branches inherit that
	// directory, and a log quotes the statements (a mask's among them).
	settings["logging_collector"] = "off"
	maps.Copy(settings, InPlaceSettings(dataDir))
	maps.Copy(settings, extra)
	inst, err := rt.Start(ctx, runtime.Spec{
		Name:      "pgbranch-seed",
		Version:   version,
		DataDir:   dataDir,
		SocketDir: sockDir,
		LogFile:   filepath.Join(work, "seed.log"),
		Settings:  settings,
		Image:     image,
	})
	if err != nil {
		return nil, fmt.Errorf("start server on seed: %w", err)
	}
	return &server{inst: inst, sockDir: sockDir}, nil
}

func (s *server) stop() error {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		s.stopErr = s.inst.Stop(ctx)
	})
	return s.stopErr
}

func (s *server) connect(ctx context.Context, user, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database = s.sockDir, 5432, user, db
	cfg.TLSConfig = nil
	cfg.Fallbacks = nil
	cfg.RuntimeParams = map[string]string{"application_name": "pgbranchproxy-seed"}
	return pgx.ConnectConfig(ctx, cfg)
}

func (s *server) exec(ctx context.Context, user, db, sql string) error {
	c, err := s.connect(ctx, user, db)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	_, err = c.Exec(ctx, sql)
	return err
}

// findSuperuser returns the first of the candidate roles that can connect and is a
// superuser. A candidate that connects but is not one (a --from-url role with
// REPLICATION and nothing more) names the cluster's first login superuser, tried
// next: the bootstrap superuser need not be called postgres (initdb -U admin).
func (s *server) findSuperuser(ctx context.Context, candidates ...string) (string, error) {
	var lastErr error
	queue := slices.Concat(candidates, []string{Superuser})
	tried := map[string]bool{}
	for i := 0; i < len(queue); i++ {
		role := queue[i]
		if tried[role] {
			continue
		}
		tried[role] = true
		c, err := s.connect(ctx, role, "postgres")
		if err != nil {
			c, err = s.connect(ctx, role, "template1")
		}
		if err != nil {
			lastErr = err
			continue
		}
		var super bool
		var first string
		err = c.QueryRow(ctx, `SELECT rolsuper, coalesce((SELECT rolname FROM pg_roles WHERE rolsuper AND rolcanlogin
			ORDER BY oid LIMIT 1), '') FROM pg_roles WHERE rolname = current_user`).Scan(&super, &first)
		c.Close(context.Background())
		if err == nil && super {
			return role, nil
		}
		if first != "" {
			queue = append(queue, first)
		}
		lastErr = fmt.Errorf("role %q is not a superuser", role)
	}
	return "", fmt.Errorf("no superuser role to settle the seed with: %w", lastErr)
}

// settle freezes and analyzes every database, then moves WAL to a fresh segment so
// that the shutdown checkpoint starts it. It returns the databases that accept
// connections.
func (s *server) settle(ctx context.Context, superuser string, progress func(string)) ([]string, error) {
	c, err := s.connect(ctx, superuser, "template1")
	if err != nil {
		return nil, err
	}
	rows, err := c.Query(ctx, "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname")
	if err != nil {
		c.Close(context.Background())
		return nil, err
	}
	dbs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	c.Close(context.Background())
	if err != nil {
		return nil, err
	}
	for _, db := range dbs {
		progress("VACUUM (FREEZE, ANALYZE) in " + db)
		start := time.Now()
		// ANALYZE writes pg_statistic after VACUUM passed it, so freeze it once more:
		// otherwise the first read in every branch sets its hint bits.
		for _, sql := range []string{"VACUUM (FREEZE, ANALYZE)", "VACUUM (FREEZE) pg_catalog.pg_statistic"} {
			if err := s.exec(ctx, superuser, db, sql); err != nil {
				return nil, fmt.Errorf("%s in %q: %w", sql, db, err)
			}
		}
		progress(fmt.Sprintf("  %s done in %s", db, time.Since(start).Round(time.Millisecond)))
	}
	if err := s.exec(ctx, superuser, "template1", "CHECKPOINT"); err != nil {
		return nil, err
	}
	if err := s.exec(ctx, superuser, "template1", "SELECT pg_switch_wal()"); err != nil {
		return nil, err
	}
	return dbs, nil
}

// urlUser is the role a connection string logs in as, or "".
func urlUser(u string) string {
	cfg, err := pgconn.ParseConfig(u)
	if err != nil {
		return ""
	}
	return cfg.User
}

// roles reads the cluster's login roles.
func (s *server) roles(ctx context.Context, superuser string) (roles.Set, error) {
	c, err := s.connect(ctx, superuser, "template1")
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	return roles.Read(ctx, c)
}
