package branches

import (
	"strings"
	"testing"
)

// A branch a little over a small quota is told by how much, not "1 MiB of 1 MiB".
func TestQuotaErrorSizes(t *testing.T) {
	e := &QuotaError{Branch: "b", Owned: 3 << 19, Quota: 1 << 20, Then: "it refuses new sessions"}
	if got := e.Error(); !strings.Contains(got, "it owns 1.5 MiB of 1.0 MiB") {
		t.Errorf("%s", got)
	}
	e.Owned = 1<<20 + 4096
	if got := e.Error(); !strings.Contains(got, "it owns 1052672 bytes of 1048576 bytes") {
		t.Errorf("4 KiB over: %s", got)
	}
}

// A session refused for a branch over its quota is told 53100, in words that
// name the branch and its usage, and ranks as ErrQuota among other errors.
func TestQuotaErrorTells(t *testing.T) {
	var told interface {
		SQLState() string
		ClientMessage() string
		ClientHint() string
		Rank() int
	} = &QuotaError{Branch: "b", Owned: 3 << 20, Quota: 2 << 20, Then: "it refuses new sessions"}
	if told.SQLState() != "53100" || !strings.Contains(told.ClientMessage(), `branch "b"`) ||
		!strings.Contains(told.ClientMessage(), "3.0 MiB of 2.0 MiB") || told.ClientHint() == "" || told.Rank() != ErrQuota.Rank() {
		t.Fatalf("told %s %q hint %q rank %d", told.SQLState(), told.ClientMessage(), told.ClientHint(), told.Rank())
	}
}
