package roles

// AfterLogin is an error that a client may be told only once it has logged in,
// as it names what the client could not see otherwise (the sources, whether a
// database exists), returned by a role lookup in place of a Set. The client logs
// in against Set first, and is refused with Err only if it proves a password:
// a client without one gets the same refusal as for a wrong password.
type AfterLogin struct {
	Set Set
	Err error
}

func (e *AfterLogin) Error() string { return e.Err.Error() }

func (e *AfterLogin) Unwrap() error { return e.Err }

// Union returns the roles of all sets, a role that several have as the first of
// them has it.
func Union(sets ...Set) Set {
	out := Set{}
	for _, s := range sets {
		for name, r := range s {
			if _, ok := out[name]; !ok {
				out[name] = r
			}
		}
	}
	return out
}
