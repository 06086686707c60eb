package branches

import (
	"errors"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestPickSource: a branch created through the admin API without a source goes to
// the only source, else to the only one not seeded from a branch, so that a
// template of migrations (pgbranchtest's pgbt-…) does not break `branch create`
// for a server's other users; several of the server's own sources still need a name.
func TestPickSource(t *testing.T) {
	t.Parallel()
	src := func(name, kind string) *sourceState {
		return &sourceState{src: catalog.Source{Name: name, Kind: kind}}
	}
	tests := []struct {
		name    string
		sources []*sourceState
		want    string
		wantErr error
		errHas  string
	}{
		{name: "none", wantErr: ErrNotFound},
		{name: "only", sources: []*sourceState{src("app", "sql")}, want: "app"},
		{name: "only, from a branch", sources: []*sourceState{src("mig", KindBranch)}, want: "mig"},
		{name: "one besides templates", sources: []*sourceState{src("pgbt-1", KindBranch), src("app", "sql"), src("pgbt-2", KindBranch)}, want: "app"},
		{name: "two of its own", sources: []*sourceState{src("app", "sql"), src("crm", "dump"), src("pgbt-1", KindBranch)},
			wantErr: ErrInvalid, errHas: "(app, crm)"},
		{name: "two from branches", sources: []*sourceState{src("pgbt-1", KindBranch), src("pgbt-2", KindBranch)},
			wantErr: ErrInvalid, errHas: "(pgbt-1, pgbt-2)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newUnitManager(t, "")
			for _, s := range tt.sources {
				m.sources[s.src.Name] = s
			}
			got, err := m.pickSource("")
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("pickSource = %q, %v; want %v containing %q", got, err, tt.wantErr, tt.errHas)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("pickSource = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	m := newUnitManager(t, "")
	m.sources["app"], m.sources["pgbt-1"] = src("app", "sql"), src("pgbt-1", KindBranch)
	if got, err := m.pickSource("pgbt-1"); err != nil || got != "pgbt-1" {
		t.Fatalf("pickSource(named template) = %q, %v", got, err)
	}
	if _, err := m.pickSource("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pickSource(unknown) = %v, want ErrNotFound", err)
	}
}
