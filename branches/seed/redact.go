package seed

import "regexp"

// Passwords a program may echo from a connection string it was given (pg_basebackup
// quotes an invalid URI whole): in a URI's user information, or as password=.
var (
	uriPassword = regexp.MustCompile(`(://[^:/@\s"']*:)[^\s"']*@`) // to the last @: a password may hold one
	kvPassword  = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|'.*|\S+)`)
)

// redactPasswords hides the passwords of connection strings in a line of a seed
// build's output, which becomes progress, an error, and an audit log entry.
func redactPasswords(line string) string {
	line = uriPassword.ReplaceAllString(line, "${1}****@")
	return kvPassword.ReplaceAllString(line, "${1}****")
}
