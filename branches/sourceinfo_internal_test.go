package branches

import (
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/branches/catalog"
)

// TestSourceInfoFrom: a source seeded from a branch says which (pgbranchtest
// finds the templates of a source by it); the others' specs, files and URLs that
// may hold a password, are not shown.
func TestSourceInfoFrom(t *testing.T) {
	t.Parallel()
	m := newUnitManager(t, "")
	m.sources["tpl"] = &sourceState{src: catalog.Source{Name: "tpl", Kind: KindBranch, Spec: "app/pgbt-1-g2"}}
	m.sources["prod"] = &sourceState{src: catalog.Source{Name: "prod", Kind: "url", Spec: "postgres://repl:secret@db/app"}}
	if got := m.sourceInfo("tpl").From; got != "app/pgbt-1-g2" {
		t.Errorf("from of a source seeded from a branch = %q, want app/pgbt-1-g2", got)
	}
	if got := m.sourceInfo("prod").From; got != "" {
		t.Errorf("from of a URL source = %q, want nothing", got)
	}
}
