package errs

// SQLSTATE codes the engine's errors carry.
const (
	codeInvalidCatalogName = "3D000"
	codeDuplicateDatabase  = "42P04"
	codeCannotConnectNow   = "57P03"
	codeTooMany            = "53300"
	codeDiskFull           = "53100"
	codeAdminShutdown      = "57P01"
	codeInvalidParameter   = "22023"
	codeObjectInUse        = "55006"
	codeSystemError        = "58000" // system_error: outside Postgres (the branch's runtime)
)

// Error is an engine error that says what a client is told about it, as a
// server's ErrorResponse does: a SQLSTATE, a message and a hint. The engine
// returns the package's values wrapped; a front door finds them in a chain with
// errors.As, or by the methods, without knowing each one.
type Error struct {
	text    string // Error(): what logs and wrapping errors say
	code    string
	message string // what a client is told; text when empty
	hint    string
	rank    int // position in precedence
}

func (e *Error) Error() string { return e.text }

// SQLState is the code a client is told.
func (e *Error) SQLState() string { return e.code }

// ClientMessage is the message a client is told. It names nothing internal.
func (e *Error) ClientMessage() string {
	if e.message != "" {
		return e.message
	}
	return e.text
}

// ClientHint is the hint a client is told, or "".
func (e *Error) ClientHint() string { return e.hint }

// Rank orders the errors of one chain: a client is told of the one of lowest rank.
func (e *Error) Rank() int { return e.rank }
