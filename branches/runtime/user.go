package runtime

import (
	"fmt"
	"os/user"
	"strconv"
)

// OSUser is the unprivileged account Postgres runs as.
type OSUser struct {
	Name     string
	UID, GID int
}

// LookupUser resolves name to its uid and gid; root is refused, as Postgres refuses it.
func LookupUser(name string) (OSUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return OSUser{}, fmt.Errorf("OS user %q does not exist: create it (e.g. install the postgresql package) or pass --pg-user", name)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return OSUser{}, fmt.Errorf("postgres cannot run as root: pass --pg-user with an unprivileged user")
	}
	return OSUser{Name: name, UID: uid, GID: gid}, nil
}
