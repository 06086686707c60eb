package pgbranchtest

import (
	"context"
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

// A PGBRANCH_URL the helper cannot use is refused without printing it: it may
// hold a password, and test logs keep the message.
func TestBadProxyURLNotEchoed(t *testing.T) {
	for _, in := range []string{"host=h user=u password=s3cret dbname=app", "postgres://u:p%zzs3cret@h/app", "postgresql+pgx://u:s3cret@h/app"} {
		c := &config{proxyURL: in}
		_, _, _, _, err := c.resolve(context.Background())
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "PGBRANCH_URL is") {
			t.Errorf("PGBRANCH_URL %q: %v", in, err)
		}
	}
}
