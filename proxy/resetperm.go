package proxy

import (
	"fmt"

	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// codeInsufficientPrivilege is insufficient_privilege.
const codeInsufficientPrivilege = "42501"

// mayReset refuses pgbranch.reset=on to a logged-in user that is not a superuser
// of the branch (set is the roles the user logged in with): a reset throws away
// what every role wrote in every database of the branch, which inside Postgres
// only a superuser could drop. A set recorded before superusers were does not
// tell, and lets every role reset, as before.
func mayReset(route router.Route, set roles.Set, user string) error {
	if !route.Options.Reset || set[user].MaySuperuse() {
		return nil
	}
	return &ClientError{Code: codeInsufficientPrivilege,
		Message: fmt.Sprintf("permission denied to reset branch %q", route.Branch),
		Hint:    router.OptReset + "=on needs a superuser of the branch; an administrator can run pgbranchproxy branch reset"}
}
