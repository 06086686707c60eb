package main

import (
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches"
)

func TestLimitsText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    branches.ServerView
		want string
	}{
		{branches.ServerView{}, "-"},
		{branches.ServerView{Image: "postgres:16"}, "-"},
		{branches.ServerView{MemoryBytes: 512 << 20}, "memory=512MB"},
		{branches.ServerView{MemoryBytes: 3 << 29, CPUs: 0.5, PIDs: 200}, "memory=1.5GB cpus=0.5 pids=200"},
		{branches.ServerView{CPUs: 2}, "cpus=2"},
		{branches.ServerView{PIDs: 64}, "pids=64"},
	} {
		if got := limitsText(tc.v); got != tc.want {
			t.Errorf("limitsText(%+v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestSizeText(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		0: "0B", 1000: "1000B", 1 << 10: "1kB", 6 << 20: "6MB", 1 << 30: "1GB",
		1536 << 20: "1.5GB", 2 << 40: "2TB", 1<<20 + 1: "1.0MB", 5000 << 40: "5000TB",
	} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

// branch ls and source ls show IMAGE and LIMITS only when some row has one: the
// listing of the process runtime stays as it was.
func TestListingServerColumns(t *testing.T) {
	t.Parallel()
	lines := func(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }
	fields := func(s string) string { return strings.Join(strings.Fields(s), " ") }

	var out strings.Builder
	plain := []branches.Info{{Source: "app", Name: "b1", State: "running", CowMode: "lazyrw", Sessions: 1}}
	if err := writeBranchTable(&out, plain, false); err != nil {
		t.Fatal(err)
	}
	if got := lines(out.String()); len(got) != 2 || fields(got[0]) != "SOURCE NAME STATE COW SESSIONS LAST USED" ||
		fields(got[1]) != "app b1 running lazyrw 1 -" {
		t.Errorf("branch ls, process runtime:\n%s", out.String())
	}

	out.Reset()
	docker := []branches.Info{
		{Source: "app", Name: "b1", State: "running", CowMode: "eager", ServerView: branches.ServerView{Image: "postgres:16"}},
		{Source: "app", Name: "b2", State: "stopped", CowMode: "lazyrw", ServerView: branches.ServerView{Image: "postgres:16", MemoryBytes: 256 << 20, CPUs: 0.5}},
	}
	if err := writeBranchTable(&out, docker, true); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"SOURCE NAME STATE COW SESSIONS LAST USED OWNED MiB IMAGE LIMITS",
		"app b1 running eager 0 - 0.0 postgres:16 -",
		"app b2 stopped lazyrw 0 - 0.0 postgres:16 memory=256MB cpus=0.5",
	}
	if got := lines(out.String()); len(got) != len(want) || fields(got[0]) != want[0] || fields(got[1]) != want[1] || fields(got[2]) != want[2] {
		t.Errorf("branch ls, docker runtime:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}

	out.Reset()
	sources := []branches.SourceInfo{{Name: "app", Kind: "sql", Generation: 2, PGVersion: "15", Databases: []string{"app"}, Branches: 3}}
	if err := writeSourceTable(&out, sources); err != nil {
		t.Fatal(err)
	}
	if got := lines(out.String()); len(got) != 2 || fields(got[0]) != "NAME KIND GENERATION PG DATABASES BRANCHES" ||
		fields(got[1]) != "app sql 2 15 app 3" {
		t.Errorf("source ls, process runtime:\n%s", out.String())
	}

	out.Reset()
	sources[0].ServerView = branches.ServerView{Image: "pgbranchproxy/postgres:15", PIDs: 100}
	sources = append(sources, branches.SourceInfo{Name: "shop", Kind: "empty", Generation: 1, PGVersion: "15",
		Databases: []string{"postgres"}, ServerView: branches.ServerView{Image: "postgres:16"}})
	if err := writeSourceTable(&out, sources); err != nil {
		t.Fatal(err)
	}
	want = []string{
		"NAME KIND GENERATION PG DATABASES BRANCHES IMAGE LIMITS",
		"app sql 2 15 app 3 pgbranchproxy/postgres:15 pids=100",
		"shop empty 1 15 postgres 0 postgres:16 -",
	}
	if got := lines(out.String()); len(got) != len(want) || fields(got[0]) != want[0] || fields(got[1]) != want[1] || fields(got[2]) != want[2] {
		t.Errorf("source ls, docker runtime:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}
}

// branch ls says below its table why a branch's last start failed, as a client
// refused with "the branch's server did not start" is told it does, and why a
// branch is lost or fenced.
func TestBranchErrorsBelowTable(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	writeBranchErrors(&out, []branches.Info{
		{Source: "app", Name: "ok", State: "running"},
		{Source: "app2", Name: "b1", State: "stopped", Error: `create container from h4/pg:15: No such image: h4/pg:15`},
		{Source: "app", Name: "gone", State: "lost", Error: "its node was declared dead"},
	})
	want := "app2/b1: its last start failed: create container from h4/pg:15: No such image: h4/pg:15\n" +
		"app/gone is lost: its node was declared dead\n"
	if out.String() != want {
		t.Errorf("branch ls errors:\n%s\nwant:\n%s", out.String(), want)
	}
}
