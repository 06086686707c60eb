package catalog

// schema is applied at Open. Statements are idempotent; columns added later go in
// addedColumns (migrate.go) so that an older state directory keeps working; new
// tables go here with IF NOT EXISTS (and in tables, below). Column types are
// tokens that each backend replaces (dialect.types): <id> is the table's
// generated integer key, <int> a 64-bit integer, <bool>, <false>, <real> a
// double, <blob> bytes, <small> a 16-bit integer. Open splits the text at each ";", so none may appear
// inside a statement.
const schema = `
CREATE TABLE IF NOT EXISTS sources (
	name             TEXT PRIMARY KEY,
	kind             TEXT NOT NULL,
	spec             TEXT NOT NULL DEFAULT '',
	default_database TEXT NOT NULL DEFAULT '',
	created_at       <int> NOT NULL
);
CREATE TABLE IF NOT EXISTS seeds (
	id          <id>,
	source      TEXT NOT NULL,
	generation  <int> NOT NULL,
	state       TEXT NOT NULL,
	dir         TEXT NOT NULL,
	pg_version  TEXT NOT NULL DEFAULT '',
	databases   TEXT NOT NULL DEFAULT '',
	superuser   TEXT NOT NULL DEFAULT '',
	roles       TEXT NOT NULL DEFAULT '',
	created_at  <int> NOT NULL,
	ready_at    <int> NOT NULL DEFAULT 0,
	UNIQUE (source, generation)
);
CREATE TABLE IF NOT EXISTS branches (
	id            <id>,
	source        TEXT NOT NULL,
	name          TEXT NOT NULL,
	seed_id       <int> NOT NULL,
	parent        TEXT NOT NULL DEFAULT '',
	layers        TEXT NOT NULL DEFAULT '',
	state         TEXT NOT NULL,
	cow_mode      TEXT NOT NULL DEFAULT '',
	pid           <int> NOT NULL DEFAULT 0,
	ttl_ns        <int> NOT NULL DEFAULT 0,
	ephemeral     <bool> NOT NULL DEFAULT <false>,
	quota         <int> NOT NULL DEFAULT 0,
	roles         TEXT NOT NULL DEFAULT '',
	owned_bytes   <int> NOT NULL DEFAULT 0,
	create_ms     <int> NOT NULL DEFAULT 0,
	error         TEXT NOT NULL DEFAULT '',
	created_at    <int> NOT NULL,
	last_used_at  <int> NOT NULL,
	state_at      <int> NOT NULL,
	UNIQUE (source, name)
);
CREATE TABLE IF NOT EXISTS transitions (
	id         <id>,
	at         <int> NOT NULL,
	source     TEXT NOT NULL,
	branch     TEXT NOT NULL,
	from_state TEXT NOT NULL,
	to_state   TEXT NOT NULL,
	reason     TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS transitions_branch ON transitions (source, branch);
CREATE INDEX IF NOT EXISTS transitions_at ON transitions (at);
CREATE TABLE IF NOT EXISTS server_settings (
	source         TEXT NOT NULL,
	branch         TEXT NOT NULL DEFAULT '',
	branch_created <int> NOT NULL DEFAULT 0,
	image          TEXT NOT NULL DEFAULT '',
	memory_bytes   <int> NOT NULL DEFAULT 0,
	cpus           <real> NOT NULL DEFAULT 0,
	pids           <int> NOT NULL DEFAULT 0,
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
	hash       <blob> NOT NULL,
	created_at <int> NOT NULL
);
CREATE TABLE IF NOT EXISTS audit (
	id      <id>,
	at      <int> NOT NULL,
	actor   TEXT NOT NULL,
	action  TEXT NOT NULL,
	target  TEXT NOT NULL DEFAULT '',
	result  TEXT NOT NULL,
	remote  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS audit_at ON audit (at);
`

// schemaBinding holds at most one row: the id of the state directory the catalog
// belongs to (binding.go).
const schemaBinding = `
CREATE TABLE IF NOT EXISTS binding (
	one      <int> PRIMARY KEY CHECK (one = 1),
	state_id TEXT NOT NULL,
	bound_at <int> NOT NULL
);
`

// schemaAuthSecret holds at most one row: the secret of the stand-in login
// exchanges for roles that do not exist (authsecret.go).
const schemaAuthSecret = `
CREATE TABLE IF NOT EXISTS auth_secret (
	one    <int> PRIMARY KEY CHECK (one = 1),
	secret <blob> NOT NULL
);
`

// schemaNodes holds the nodes: the processes that run branches on a catalog,
// each under the id of its state directory (nodes.go). lease_until is in the
// catalog's clock (unix nanoseconds); load is JSON. slot goes into cancel keys.
const schemaNodes = `
CREATE TABLE IF NOT EXISTS nodes (
	id          TEXT PRIMARY KEY,
	slot        <small> NOT NULL UNIQUE CHECK (slot BETWEEN 1 AND 4095),
	addr        TEXT NOT NULL DEFAULT '',
	epoch       <int> NOT NULL,
	lease_until <int> NOT NULL,
	state       TEXT NOT NULL,
	load        TEXT NOT NULL DEFAULT '{}'
);
`

// table is one table of the catalog, for Copy.
type table struct {
	name   string
	serial bool // has an <id> column whose sequence must continue after copied ids
}

// tables lists every table of schema, schemaAdmin, schemaBinding, schemaAuthSecret, schemaNodes and schemaSeedCopies, in an order in which
// copying them one after the other is valid.
var tables = []table{
	{"sources", false}, {"seeds", true}, {"branches", true}, {"transitions", true},
	{"server_settings", false}, {"tokens", false}, {"audit", true},
	{"binding", false},     // Copy carries the state id: the state directory is bound to the copy
	{"auth_secret", false}, // and the secret: a role that does not exist keeps its stand-in salt
	{"nodes", false}, {"node_seeds", false},
}
