// Package errs holds the branch engine's sentinel errors: the engine (package
// branches) and its catalog return them, wrapped, and a front door tells a client
// what each carries (its SQLSTATE, message and hint: see Error) without linking
// the engine, its catalog drivers or its storage. It imports nothing of this
// module.
//
// Callers test them with errors.Is; the engine's packages re-export them under
// the same names (branches.ErrQuota is errs.ErrQuota).
package errs
