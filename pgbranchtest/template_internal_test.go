package pgbranchtest

import (
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/router"
)

// A template's name is a valid source and branch name, differs by seed generation
// and ends with it.
func TestTemplateName(t *testing.T) {
	a, b := templateName("app", 3, "app", "h1"), templateName("app", 4, "app", "h1")
	if a == b || !strings.HasSuffix(a, "-g3") || !strings.HasPrefix(a, templatePrefix) {
		t.Errorf("template names %q and %q", a, b)
	}
	if !router.ValidBranchName(a) || !router.ValidSourceName(a) {
		t.Errorf("%q is not a valid branch and source name", a)
	}
}
