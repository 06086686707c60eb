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
