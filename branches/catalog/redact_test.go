package catalog_test

import (
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

func TestRedactQueryPassword(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"postgres://u:s3cret@h/db", "postgres://u@h/db?password=s3cret", "postgres://u@h/db?sslpassword=s3cret&sslmode=require"} {
		if got := catalog.Redact(dsn); strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q shows the password", dsn, got)
		}
	}
}
