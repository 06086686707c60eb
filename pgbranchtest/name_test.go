package pgbranchtest_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/pgbranchtest"
)

func TestBranchName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)
	for name, prefix := range map[string]string{
		"TestUsers":                       "testusers-",
		"TestUsers/with_email#01":         "testusers-with-email-01-",
		"TestÜber/../..":                  "test-ber-",
		"///":                             "test-",
		strings.Repeat("TestLong", 20):    strings.Repeat("testlong", 7),
		"Test_" + strings.Repeat("x", 51): "test-" + strings.Repeat("x", 51) + "-",
	} {
		got := pgbranchtest.BranchName(name)
		if !valid.MatchString(got) || !strings.HasPrefix(got, prefix) {
			t.Errorf("BranchName(%q) = %q, want a valid name starting %q", name, got, prefix)
		}
	}
	if a, b := pgbranchtest.BranchName("TestX"), pgbranchtest.BranchName("TestX"); a == b {
		t.Errorf("two branches of one test share the name %q", a)
	}
}
