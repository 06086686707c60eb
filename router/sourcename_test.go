package router_test

import (
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/router"
)

func TestValidSourceName(t *testing.T) {
	t.Parallel()
	good := []string{"a", "0", "demo", "my_app", "my-app", "a_", "a__b", strings.Repeat("z", 63)}
	bad := []string{"", "-a", "_a", "A", "My_app", "a.b", "..", ".", "a/b", "/", "../x", "a\x00", "a\x00b",
		strings.Repeat("z", 64), "é", "a b", "a\tb", "a\n"}
	for _, n := range good {
		if !router.ValidSourceName(n) {
			t.Errorf("ValidSourceName(%q) = false", n)
		}
	}
	for _, n := range bad {
		if router.ValidSourceName(n) {
			t.Errorf("ValidSourceName(%q) = true", n)
		}
	}
}

func FuzzValidSourceName(f *testing.F) {
	for _, s := range []string{"my_app", "..", "a/b", "A", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !router.ValidSourceName(name) {
			return
		}
		if strings.ContainsAny(name, "/.\x00 ") || strings.ToLower(name) != name || len(name) > 63 {
			t.Fatalf("ValidSourceName(%q) = true", name)
		}
	})
}
