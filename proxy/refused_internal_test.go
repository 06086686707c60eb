package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every SQLSTATE refusals are counted by has a counter of its own, and any other
// code shares the last one.
func TestRefusedCounts(t *testing.T) {
	if n := len(RefusedCodes()); n != numRefusedCodes {
		t.Fatalf("%d RefusedCodes, numRefusedCodes = %d", n, numRefusedCodes)
	}
	var s Stats
	for _, code := range RefusedCodes() {
		s.countRefused(code)
	}
	s.countRefused("42P01")
	s.countRefused("")
	by := s.RefusedBy()
	for _, code := range RefusedCodes() {
		if by[code] != 1 {
			t.Errorf("%s counted %d times, want 1", code, by[code])
		}
	}
	if by[RefusedOther] != 2 || len(by) != numRefusedCodes+1 {
		t.Errorf("other = %d, want 2; %d labels, want %d", by[RefusedOther], len(by), numRefusedCodes+1)
	}
	if s.Refused.Load() != int64(numRefusedCodes+2) {
		t.Errorf("Refused = %d", s.Refused.Load())
	}
}

// Every SQLSTATE the proxy tells a client (a code* constant of the package) is
// counted under its own label, not as other: a code added later must be added to
// RefusedCodes too.
func TestRefusedCodesHaveEveryCode(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// The engine's errors carry codes of their own, which a client is refused with.
	engine, err := filepath.Glob("../branches/errs/*.go")
	if err != nil {
		t.Fatal(err)
	}
	names = append(names, engine...)
	fset := token.NewFileSet()
	found := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "code") {
				return true
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			code, err := strconv.Unquote(lit.Value)
			if err != nil || len(code) != 5 {
				return true
			}
			found++
			if !slices.Contains(RefusedCodes(), code) {
				t.Errorf("%s (%s, %s) is not among RefusedCodes: its refusals count as %s", vs.Names[0].Name, code, name, RefusedOther)
			}
			return true
		})
	}
	if found < numRefusedCodes {
		t.Fatalf("found %d code constants: does the test still read them?", found)
	}
}
