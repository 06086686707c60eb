package proxy

import (
	"fmt"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

// A write that finds its branch lost fails with ErrLost and ErrFenced at once:
// the client is told the branch was lost, which it can act on.
func TestClassifyLostBeforeFenced(t *testing.T) {
	err := fmt.Errorf("record stop: %w: %w", branches.ErrFenced, branches.ErrLost)
	if ce := classify(err); ce.message != "the branch was on a lost node" {
		t.Fatalf("classified as %q, want the branch lost", ce.message)
	}
}
