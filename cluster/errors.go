package cluster

import "errors"

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrExists: the directory has a CA already (Init), or a member of that role
	// and name (Issue without Force).
	ErrExists = errors.New("already exists")
	// ErrNoCA: the directory has no cluster CA (Issue before Init).
	ErrNoCA = errors.New("no cluster CA")
	// ErrInvalid: a request that can never succeed: an unknown role, a bad name or
	// host, a negative lifetime.
	ErrInvalid = errors.New("invalid request")
	// ErrExpired: a certificate is outside its validity period (the CA at Issue, a
	// member's own certificate at Load, a node's certificate when a front dials it).
	ErrExpired = errors.New("certificate expired or not yet valid")
	// ErrWrongRole: a certificate of the cluster CA that has another role than the
	// one asked for (a node certificate presented as a front's), or a Member asked
	// for a configuration of the other role.
	ErrWrongRole = errors.New("wrong cluster role")
	// ErrWrongName: a node certificate of another name than the node dialed.
	ErrWrongName = errors.New("wrong cluster member name")
	// ErrNoIdentity: a certificate without exactly one pgbranch:// URI SAN.
	ErrNoIdentity = errors.New("certificate names no cluster member")
)
