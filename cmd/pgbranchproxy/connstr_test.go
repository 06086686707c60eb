package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

func TestConnectionStrings(t *testing.T) {
	tg := target{Host: "proxy", Port: 6432, User: "app", Database: "app", Branch: "pr-7"}
	for got, want := range map[string]string{
		tg.libpq(): "host=proxy port=6432 user=app dbname=app@pr-7",
		tg.url():   "postgres://app@proxy:6432/app%40pr-7",
		tg.jdbc():  "jdbc:postgresql://proxy:6432/app%40pr-7?user=app",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	tg.Password, tg.Source, tg.Host = "s3 cr'et", "tpl", "::1"
	for got, want := range map[string]string{
		tg.libpq(): `host=::1 port=6432 user=app password='s3 cr\'et' dbname=app@pr-7 options='-c pgbranch.source=tpl'`,
		tg.url():   "postgres://app:s3%20cr%27et@[::1]:6432/app%40pr-7?options=-c%20pgbranch.source%3Dtpl",
		tg.jdbc():  "jdbc:postgresql://[::1]:6432/app%40pr-7?user=app&password=s3%20cr%27et&options=-c%20pgbranch.source%3Dtpl",
		strings.Join(tg.env(), "\n"): "PGHOST=::1\nPGPORT=6432\nPGUSER=app\nPGDATABASE=app@pr-7\nPGPASSWORD=s3 cr'et\n" +
			"PGOPTIONS=-cpgbranch.source=tpl\nDATABASE_URL=postgres://app:s3%20cr%27et@[::1]:6432/app%40pr-7?options=-c%20pgbranch.source%3Dtpl",
	} {
		if got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{usageErrorf("bad"), exitUsage},
		{&apiError{status: http.StatusNotFound, msg: `branch "x": not found`}, exitNotFound},
		{&apiError{status: http.StatusConflict, msg: `branch "x" of source "app": already exists`}, exitExists},
		{&apiError{status: http.StatusConflict, msg: "branch has open sessions"}, exitError},
		{&apiError{status: http.StatusUnauthorized, msg: "missing or wrong bearer token"}, exitError},
		{fmt.Errorf("serve: %w", errRestart), exitRestart},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
	for _, args := range [][]string{
		{"branch", "url"},         // a missing argument
		{"branch", "bogus"},       // an unknown command in a group
		{"token", "rm", "x", "y"}, // an extra argument
		{"branch", "url", "PR 1"}, // a name the server would refuse
		{"branch", "create", "pr-1", "--user", "a\nPGHOST=x"}, // a value that would start a line of its own
		// A git branch's name, where a job meant a slug of it: refused, not "not
		// found" (and not done, for destroy --if-exists).
		{"branch", "destroy", "feature/ABC-12_x", "--if-exists"},
		{"branch", "reset", "Feature-1"},
		{"branch", "stop", ".."},
		{"branch", "set", "pr/1", "--ttl", "1h"},
		{"branch", "set", "pr-1"}, // nothing to set
	} {
		root := newRoot()
		root.SetArgs(append([]string{"--state-dir", t.TempDir()}, args...))
		root.SetOut(new(strings.Builder))
		if err := root.Execute(); exitCode(err) != exitUsage {
			t.Errorf("%q: %v (exit %d), want a usage error", args, err, exitCode(err))
		}
	}
	root := newRoot()
	root.SetArgs([]string{"branch"})
	root.SetOut(new(strings.Builder))
	if err := root.Execute(); err != nil {
		t.Errorf("a group alone prints its help: %v", err)
	}
}

// TestOnlySource: without --source, branch url and create --output print the source
// the server creates a branch in: the only one, else the only one not seeded from a
// branch (a template of migrations does not make the server's own source ambiguous).
func TestOnlySource(t *testing.T) {
	app := branches.SourceInfo{Name: "app", Kind: "sql"}
	crm := branches.SourceInfo{Name: "crm", Kind: "dump"}
	tpl := branches.SourceInfo{Name: "pgbt-1", Kind: branches.KindBranch}
	tpl2 := branches.SourceInfo{Name: "pgbt-2", Kind: branches.KindBranch}
	for _, c := range []struct {
		sources []branches.SourceInfo
		want    string
	}{
		{nil, ""},
		{[]branches.SourceInfo{app}, "app"},
		{[]branches.SourceInfo{tpl}, "pgbt-1"},
		{[]branches.SourceInfo{tpl, app, tpl2}, "app"},
		{[]branches.SourceInfo{app, crm, tpl}, ""},
		{[]branches.SourceInfo{tpl, tpl2}, ""},
	} {
		if got := onlySource(c.sources); got != c.want {
			t.Errorf("onlySource(%v) = %q, want %q", c.sources, got, c.want)
		}
	}
}
