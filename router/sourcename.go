package router

// sourceNameHint tells the user what ValidSourceName accepts.
const sourceNameHint = "source names are 1-63 characters of a-z, 0-9, '_' and '-', starting with a letter or digit"

// SourceNameHint returns what ValidSourceName accepts, for error messages.
func SourceNameHint() string { return sourceNameHint }

// ValidSourceName reports whether name matches ^[a-z0-9][a-z0-9_-]{0,62}$. Source
// names default to their database's name, where '_' is common, and become directory,
// process and container names (seeds/NAME, pgbranch-NAME-BRANCH): "..", "/", NUL,
// '.', whitespace and uppercase never pass.
func ValidSourceName(name string) bool {
	if len(name) == 0 || len(name) > maxBranchName || name[0] == '-' || name[0] == '_' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}
