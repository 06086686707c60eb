package branches

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// pgbranch_branch_action_seconds' help names every action the manager times: the
// first argument of each took call in the package, and the operation of each
// adminOp call (which times it under that name).
func TestActionSecondsHelpNamesEveryAction(t *testing.T) {
	timed := actionsPassedTo(t, map[string]int{"took": 0, "adminOp": 3})
	if len(timed) < 5 {
		t.Fatalf("found only %v timed: does the test still read the calls?", timed)
	}
	var names []string
	for _, a := range timedActions() {
		names = append(names, a[0])
	}
	ch := make(chan *prometheus.Desc, 1)
	NewMetrics().durations.Describe(ch)
	help := (<-ch).String()
	for _, a := range timed {
		if !slices.Contains(names, a) || !strings.Contains(help, a+" (") {
			t.Errorf("action %q is timed but not named in timedActions and the help: %s", a, help)
		}
	}
}

// actionsPassedTo returns the string literals passed, in the package's non-test
// files, to the functions of args at the argument index given.
func actionsPassedTo(t *testing.T, args map[string]int) []string {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			i, ok := args[sel.Sel.Name]
			if !ok || len(call.Args) <= i {
				return true
			}
			if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
			return true
		})
	}
	return out
}
