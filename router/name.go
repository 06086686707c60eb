package router

// maxBranchName is the longest branch name, in bytes: Postgres's NAMEDATALEN-1.
const maxBranchName = 63

// BranchNameHint tells a user what ValidBranchName accepts.
const BranchNameHint = "branch names are 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit"

// ValidBranchName reports whether name matches ^[a-z0-9][a-z0-9-]{0,62}$, so that it is
// safe as a directory, process and container name: "..", "/", NUL, whitespace and
// uppercase never pass.
func ValidBranchName(name string) bool {
	if len(name) == 0 || len(name) > maxBranchName || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// invalidBranch is the error for a branch name that fails ValidBranchName.
func invalidBranch(name string) *Error {
	return &Error{
		Err:     ErrInvalidName,
		Message: "invalid branch name " + quote(name),
		Hint:    BranchNameHint,
	}
}
