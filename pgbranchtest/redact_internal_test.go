package pgbranchtest

import (
	"net/url"
	"strings"
	"testing"
)

// TestKeptURLRedacted: the connection string logged for a failed test's branch
// names the branch but not the password of PGBRANCH_URL, which CI logs would show.
func TestKeptURLRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:s3cret@proxy:6432/app?sslmode=disable": "postgres://app:xxxxx@proxy:6432/app%40t-1?options=-c%20pgbranch.source%3Dsrc&sslmode=disable",
		"postgres://app@proxy:6432/app?password=s3%20cret":     "postgres://app@proxy:6432/app%40t-1?options=-c%20pgbranch.source%3Dsrc&password=xxxxx",
		"postgres://app@proxy:6432/app":                        "postgres://app@proxy:6432/app%40t-1?options=-c%20pgbranch.source%3Dsrc",
	} {
		base, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		got := redacted(branchURL(base, "app", "t-1", "src", false))
		if got != want || strings.Contains(got, "s3") {
			t.Errorf("redacted(%q):\n got  %s\n want %s", in, got, want)
		}
	}
}
