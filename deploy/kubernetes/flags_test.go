package kubernetes_test

import (
	"regexp"
	"strings"
	"testing"
)

// serveFlag is one flag `pgbranchproxy serve --help` lists.
type serveFlag struct {
	takesValue bool   // false for a boolean flag
	def        string // its default as the help prints it, "" if none
}

// helpFlag matches a flag line of cobra's help: "  -h, --name type   usage".
var helpFlag = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)(?: (\w+))?\s{2,}(.*)$`)

var helpDefault = regexp.MustCompile(`\(default "?([^")]*)"?\)$`)

// serveFlags returns the flags serve accepts (its own and the global ones), as
// the built binary's help lists them; hidden flags are not among them.
func serveFlags(t *testing.T) map[string]serveFlag {
	t.Helper()
	if len(serveFlagsSet) == 0 {
		t.Fatal("no flags read from serve --help")
	}
	return serveFlagsSet
}

func parseHelp(help string) map[string]serveFlag {
	flags := map[string]serveFlag{}
	for line := range strings.Lines(help) {
		m := helpFlag.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		f := serveFlag{takesValue: m[2] != ""}
		if d := helpDefault.FindStringSubmatch(m[3]); d != nil {
			f.def = d[1]
		}
		flags[m[1]] = f
	}
	return flags
}

// parseArgs splits a container's args for serve into flag values. It fails on
// anything but "serve" first and known flags after.
func parseArgs(t *testing.T, args []string) map[string]string {
	t.Helper()
	known := serveFlags(t)
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("args %q: want serve first", args)
	}
	out := map[string]string{}
	for i := 1; i < len(args); i++ {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(args[i], "--"), "=")
		f, ok := known[name]
		if !strings.HasPrefix(args[i], "--") || !ok {
			t.Errorf("args: %q is not a flag of serve", args[i])
			continue
		}
		if f.takesValue && !hasValue {
			if i+1 == len(args) {
				t.Errorf("args: %s has no value", args[i])
				continue
			}
			i++
			value = args[i]
		} else if !f.takesValue && !hasValue {
			value = "true"
		}
		if _, dup := out[name]; dup {
			t.Errorf("args: --%s given twice", name)
		}
		out[name] = value
	}
	return out
}

// flagOf returns a flag's value: the container's arg, else serve's default.
func flagOf(t *testing.T, args map[string]string, name string) string {
	t.Helper()
	if v, ok := args[name]; ok {
		return v
	}
	f, ok := serveFlags(t)[name]
	if !ok {
		t.Fatalf("serve has no flag --%s", name)
	}
	return f.def
}

// TestHelpParsed: the help parser finds serve's flags, so that the checks
// below check something.
func TestHelpParsed(t *testing.T) {
	t.Parallel()
	flags := serveFlags(t)
	for _, name := range []string{"role", "listen", "advertise", "catalog", "cluster-dir", "cluster-name", "state-dir", "insecure-trust", "grace"} {
		if _, ok := flags[name]; !ok {
			t.Errorf("serve --help lists no --%s (found %d flags)", name, len(flags))
		}
	}
	if flags["insecure-trust"].takesValue || !flags["listen"].takesValue {
		t.Error("booleans and valued flags told apart wrongly")
	}
	if _, ok := flags["relay-simulate-load-failure"]; ok {
		t.Error("a hidden flag is listed")
	}
	if flags["grace"].def != "10s" {
		t.Errorf("--grace default %q, want 10s as serve's help prints it", flags["grace"].def)
	}
}

// TestContainerFlags: every container runs serve with flags serve accepts,
// every PGBRANCH_ variable is one of them, and every $(VAR) in the args is a
// variable of the container (Kubernetes leaves an unknown one as it is).
func TestContainerFlags(t *testing.T) {
	t.Parallel()
	flags := serveFlags(t)
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for name, spec := range podSpecs(t, loadManifests(t)) {
		for _, c := range spec.Containers {
			parseArgs(t, c.Args)
			if len(c.Command) > 0 {
				t.Errorf("%s/%s: command %q overrides the image's entrypoint", name, c.Name, c.Command)
			}
			env := map[string]bool{}
			for _, e := range c.Env {
				env[e.Name] = true
				if flag, ok := strings.CutPrefix(e.Name, "PGBRANCH_"); ok {
					if _, known := flags[strings.ReplaceAll(strings.ToLower(flag), "_", "-")]; !known {
						t.Errorf("%s/%s: %s names no flag of serve", name, c.Name, e.Name)
					}
				}
			}
			for _, a := range c.Args {
				for _, m := range ref.FindAllStringSubmatch(a, -1) {
					if !env[m[1]] {
						t.Errorf("%s/%s: %q refers to $(%s), which the container does not define", name, c.Name, a, m[1])
					}
				}
			}
		}
	}
}
