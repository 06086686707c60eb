// Package dbdiff compares two states of a Postgres cluster: their schemas, as
// normalized pg_dump --schema-only text shown as a unified diff, and their tables'
// row counts and sizes.
package dbdiff
