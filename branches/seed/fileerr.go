package seed

import "strings"

// fileError is err of a psql run that read SQL on its standard input, its lines
// named as where (a file's name, "line ") rather than "psql:<stdin>:", after
// prefix.
func fileError(err error, prefix, where string) error {
	return &sqlFileError{msg: prefix + strings.ReplaceAll(err.Error(), "psql:<stdin>:", where), err: err}
}

// sqlFileError is a failed SQL file (the --from-sql file, the mask), its psql
// error naming the file's line rather than psql's standard input.
type sqlFileError struct {
	msg string
	err error
}

func (e *sqlFileError) Error() string { return e.msg }
func (e *sqlFileError) Unwrap() error { return e.err }
