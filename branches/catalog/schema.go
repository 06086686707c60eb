package catalog

// schema is applied at Open. Statements are idempotent; columns added later go in
// addedColumns (migrate.go) so that an older state directory keeps working; new
// tables go here with IF NOT EXISTS.
const schema = `
CREATE TABLE IF NOT EXISTS sources (
	name             TEXT PRIMARY KEY,
	kind             TEXT NOT NULL,
	spec             TEXT NOT NULL DEFAULT '',
	default_database TEXT NOT NULL DEFAULT '',
	created_at       INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS seeds (
	id          INTEGER PRIMARY KEY,
	source      TEXT NOT NULL,
	generation  INTEGER NOT NULL,
	state       TEXT NOT NULL,
	dir         TEXT NOT NULL,
	pg_version  TEXT NOT NULL DEFAULT '',
	databases   TEXT NOT NULL DEFAULT '',
	superuser   TEXT NOT NULL DEFAULT '',
	roles       TEXT NOT NULL DEFAULT '',
	created_at  INTEGER NOT NULL,
	ready_at    INTEGER NOT NULL DEFAULT 0,
	UNIQUE (source, generation)
);
CREATE TABLE IF NOT EXISTS branches (
	id            INTEGER PRIMARY KEY,
	source        TEXT NOT NULL,
	name          TEXT NOT NULL,
	seed_id       INTEGER NOT NULL,
	parent        TEXT NOT NULL DEFAULT '',
	layers        TEXT NOT NULL DEFAULT '',
	state         TEXT NOT NULL,
	cow_mode      TEXT NOT NULL DEFAULT '',
	pid           INTEGER NOT NULL DEFAULT 0,
	ttl_ns        INTEGER NOT NULL DEFAULT 0,
	ephemeral     INTEGER NOT NULL DEFAULT 0,
	quota         INTEGER NOT NULL DEFAULT 0,
	roles         TEXT NOT NULL DEFAULT '',
	owned_bytes   INTEGER NOT NULL DEFAULT 0,
	create_ms     INTEGER NOT NULL DEFAULT 0,
	error         TEXT NOT NULL DEFAULT '',
	created_at    INTEGER NOT NULL,
	last_used_at  INTEGER NOT NULL,
	state_at      INTEGER NOT NULL,
	UNIQUE (source, name)
);
CREATE TABLE IF NOT EXISTS transitions (
	id         INTEGER PRIMARY KEY,
	at         INTEGER NOT NULL,
	source     TEXT NOT NULL,
	branch     TEXT NOT NULL,
	from_state TEXT NOT NULL,
	to_state   TEXT NOT NULL,
	reason     TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS server_settings (
	source         TEXT NOT NULL,
	branch         TEXT NOT NULL DEFAULT '',
	branch_created INTEGER NOT NULL DEFAULT 0,
	image          TEXT NOT NULL DEFAULT '',
	memory_bytes   INTEGER NOT NULL DEFAULT 0,
	cpus           REAL NOT NULL DEFAULT 0,
	pids           INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (source, branch)
);
`

// schemaAdmin holds the admin API's tokens (only their SHA-256 hashes) and its
// append-only audit log.
const schemaAdmin = `
CREATE TABLE IF NOT EXISTS tokens (
	name       TEXT PRIMARY KEY,
	role       TEXT NOT NULL,
	prefix     TEXT NOT NULL DEFAULT '',
	hash       BLOB NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
	id      INTEGER PRIMARY KEY,
	at      INTEGER NOT NULL,
	actor   TEXT NOT NULL,
	action  TEXT NOT NULL,
	target  TEXT NOT NULL DEFAULT '',
	result  TEXT NOT NULL,
	remote  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at);
`
