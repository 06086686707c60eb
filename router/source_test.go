package router_test

import (
	"errors"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/router"
)

func TestResolveSource(t *testing.T) {
	t.Parallel()
	prod := router.Source{Name: "prod", Databases: []string{"app", "postgres"}}
	stage := router.Source{Name: "stage", Databases: []string{"app", "postgres", "stats"}}
	crm := router.Source{Name: "crm", Databases: []string{"crm", "postgres"}}
	withBranch := func(s router.Source) router.Source { s.HasBranch = true; return s }
	derived := func(s router.Source) router.Source { s.Derived = true; return s }
	withParent := func(s router.Source) router.Source { s.HasParent = true; return s }
	fork := func(r router.Route) router.Route { r.Options.From = "p"; return r }
	route := func(database, source string) router.Route {
		return router.Route{Database: database, Branch: "main", Options: router.Options{Source: source}}
	}
	tests := []struct {
		name     string
		route    router.Route
		sources  []router.Source
		want     string
		wantErr  error
		wantHint string
	}{
		{name: "explicit", route: route("app", "stage"), sources: []router.Source{prod, stage}, want: "stage"},
		{name: "explicit without the database", route: route("nope", "crm"), sources: []router.Source{prod, crm}, want: "crm"},
		{name: "unknown explicit", route: route("app", "qa"), sources: []router.Source{stage, prod}, wantErr: router.ErrUnknownSource,
			wantHint: `known sources: "prod", "stage"`},
		{name: "unique by database", route: route("crm", ""), sources: []router.Source{prod, crm, stage}, want: "crm"},
		{name: "unique by database among two", route: route("stats", ""), sources: []router.Source{prod, stage}, want: "stage"},
		{name: "ambiguous by database", route: route("app", ""), sources: []router.Source{stage, crm, prod}, wantErr: router.ErrAmbiguousSource,
			wantHint: `choose one with -c pgbranch.source=NAME; candidates: "prod", "stage"`},
		{name: "ambiguous, one has the branch", route: route("app", ""), sources: []router.Source{stage, withBranch(prod)}, want: "prod"},
		{name: "ambiguous, both have the branch", route: route("app", ""), sources: []router.Source{withBranch(stage), withBranch(prod)},
			wantErr: router.ErrAmbiguousSource},
		{name: "ambiguous, one not derived", route: route("app", ""), sources: []router.Source{derived(stage), prod}, want: "prod"},
		{name: "ambiguous, the derived one has the branch", route: route("app", ""), sources: []router.Source{withBranch(derived(stage)), prod},
			want: "stage"},
		{name: "ambiguous, both derived", route: route("app", ""), sources: []router.Source{derived(stage), derived(prod)},
			wantErr: router.ErrAmbiguousSource},
		{name: "ambiguous, two derived have the branch", route: route("app", ""),
			sources: []router.Source{withBranch(derived(stage)), withBranch(derived(prod)), {Name: "own", Databases: []string{"app"}}},
			wantErr: router.ErrAmbiguousSource, wantHint: `choose one with -c pgbranch.source=NAME; candidates: "own", "prod", "stage"`},
		{name: "ambiguous, two not derived", route: route("app", ""), sources: []router.Source{derived(crm), stage, prod},
			wantErr: router.ErrAmbiguousSource},
		{name: "ambiguous, a fork of one's branch", route: fork(route("app", "")), sources: []router.Source{stage, withParent(prod)}, want: "prod"},
		{name: "ambiguous, a fork; the other has the branch", route: fork(route("app", "")), sources: []router.Source{withBranch(stage), withParent(prod)},
			want: "stage"},
		{name: "ambiguous, a fork of a branch both have", route: fork(route("app", "")), sources: []router.Source{withParent(stage), withParent(prod)},
			wantErr: router.ErrAmbiguousSource},
		{name: "ambiguous, no fork: the parent counts for nothing", route: route("app", ""), sources: []router.Source{stage, withParent(prod)},
			wantErr: router.ErrAmbiguousSource},
		{name: "single source fallback", route: route("other", ""), sources: []router.Source{crm}, want: "crm"},
		{name: "single source has it", route: route("crm", ""), sources: []router.Source{crm}, want: "crm"},
		{name: "none has it", route: route("other", ""), sources: []router.Source{stage, prod}, wantErr: router.ErrUnknownDatabase,
			wantHint: `sources: "prod", "stage"`},
		{name: "no sources", route: route("app", ""), sources: nil, wantErr: router.ErrNoSources},
		{name: "no sources, explicit", route: route("app", "prod"), sources: nil, wantErr: router.ErrNoSources},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := router.ResolveSource(tt.route, tt.sources)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				var re *router.Error
				if !errors.As(err, &re) {
					t.Fatalf("err %T is not *router.Error", err)
				}
				if tt.wantHint != "" && re.Hint != tt.wantHint {
					t.Errorf("hint = %q, want %q", re.Hint, tt.wantHint)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ResolveSource = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
