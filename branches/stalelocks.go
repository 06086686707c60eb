package branches

import (
	"os"
	"path/filepath"
)

// removeSocketLocks removes what a server that did not shut down left in its
// socket directory run: the socket and its lock file (.s.PGSQL.<port>.lock),
// whose first line is that server's pid. Only for a branch no server runs.
func removeSocketLocks(run string) {
	left, _ := filepath.Glob(filepath.Join(run, ".s.PGSQL.*"))
	for _, f := range left {
		os.Remove(f)
	}
}
