package proxy

import (
	"slices"
	"sync/atomic"
)

// RefusedOther is the SQLSTATE label of refusals whose code is none of
// RefusedCodes.
const RefusedOther = "other"

// RefusedCodes are the SQLSTATEs refused connections are counted by: those the
// proxy sends, and a branch server's refusals it passes on (53000 when the server
// cannot fork a backend). A refusal with any other code counts as RefusedOther, so
// that a metric labelled with them takes a bounded set of values.
func RefusedCodes() []string { return slices.Clone(refusedCodes[:]) }

var refusedCodes = [...]string{
	codeInvalidDatabase, codeCannotConnectNow, codeTooMany, codeInsufficientResources, codeDiskFull,
	codeAdminShutdown, codeProtocolViolation, codeInvalidPassword, codeInvalidAuthSpec,
	codeFeatureNotSupp, codeInvalidParameter, codeObjectInUse, codeSystemError, codeInternal,
	codeInsufficientPrivilege, codeDuplicateDatabase,
}

// refusedCounts counts refused connections by SQLSTATE: one counter for each of
// RefusedCodes, in their order, and a last one for the rest. The zero value
// counts from zero. Safe for concurrent use.
type refusedCounts struct {
	n [numRefusedCodes + 1]atomic.Int64
}

const numRefusedCodes = len(refusedCodes)

func (r *refusedCounts) add(code string) {
	i := slices.Index(refusedCodes[:], code)
	if i < 0 {
		i = numRefusedCodes
	}
	r.n[i].Add(1)
}

// RefusedBy returns how many connections were refused with each SQLSTATE of
// RefusedCodes, and with any other (RefusedOther); every key is present.
func (s *Stats) RefusedBy() map[string]int64 {
	out := make(map[string]int64, numRefusedCodes+1)
	for i, code := range refusedCodes {
		out[code] = s.refused.n[i].Load()
	}
	out[RefusedOther] = s.refused.n[numRefusedCodes].Load()
	return out
}

// countRefused counts one refused connection, told code.
func (s *Stats) countRefused(code string) {
	s.Refused.Add(1)
	s.refused.add(code)
}
