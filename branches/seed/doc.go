// Package seed builds and settles the read-only data directories that branches are
// layered on.
//
// A seed comes from an SQL file (initdb, then psql with ON_ERROR_STOP), a live server
// (pg_basebackup over a replication connection), a copy of a stopped cluster's data
// directory, or an empty initdb. Every seed is then settled once: started (which
// finishes any recovery), VACUUM (FREEZE, ANALYZE) in every database and once more on
// pg_statistic, switched to a fresh WAL segment, shut down cleanly, and trimmed: every
// WAL segment but the one holding the shutdown checkpoint is removed and that one's
// zero tail becomes a hole. A branch of a settled seed starts without redo, its reads
// have no hint bits left to set, and its first WAL write copies about one MiB.
package seed
