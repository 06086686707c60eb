package router_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/pgbranchproxy/pgbranchproxy/router"
)

func FuzzParse(f *testing.F) {
	f.Add("app@feature-x", "alice", "", "", "", true)
	f.Add("app@b@c", "", "", "", "", true)
	f.Add("app%40feature-x", "", "", "", "", false)
	f.Add("app", "", "", "", "", false)
	f.Add("@x", "", "", "", "", true)
	f.Add("app@../x", "", "", "", "", true)
	f.Add("app@Feature", "", "", "", "", true)
	f.Add("app@"+strings.Repeat("a", 64), "", "", "", "", true)
	f.Add("app@x\x00y", "", "", "", "", true)
	f.Add("", "bob@dev", "", "", "", true)
	f.Add("app@x", "", `-c pgbranch.ttl=1h -c work_mem=4MB`, "", "", true)
	f.Add("app@x", "", `-c application_name=a\ b --pgbranch.ephemeral=on -cpgbranch.reset=true`, "", "", true)
	f.Add("app@x", "", `-ec pgbranch.from=main -B 100 -- x`, "pgbranch.source", "prod", true)
	f.Add("app@x", "", `-c PGBRANCH.TTL=7d \`, "PgBranch.Reset", "no", true)
	f.Add("app", "", `-c pgbranch.ttl=-1h`, "application_name", "psql", true)

	f.Fuzz(func(t *testing.T, database, user, options, key, value string, hasDefault bool) {
		params := map[string]string{"database": database, "user": user}
		if options != "" {
			params["options"] = options
		}
		if key != "" {
			params[key] = value
		}
		before := maps.Clone(params)
		def := ""
		if hasDefault {
			def = "main"
		}
		r, err := router.Parse(params, def)
		if !maps.Equal(params, before) {
			t.Fatalf("Parse modified its input")
		}
		if err != nil {
			var re *router.Error
			if !errors.As(err, &re) || re.Err == nil {
				t.Fatalf("error %v is not a *router.Error with a sentinel", err)
			}
			if len(re.Message) > 400 || len(re.Hint) > 400 {
				t.Fatalf("message or hint too long: %d, %d bytes", len(re.Message), len(re.Hint))
			}
			return
		}
		if !router.ValidBranchName(r.Branch) || strings.ContainsAny(r.Branch, "/.\x00") || strings.ToLower(r.Branch) != r.Branch {
			t.Fatalf("accepted branch %q", r.Branch)
		}
		if r.Database == "" || r.Params["database"] != r.Database {
			t.Fatalf("database %q, Params[database] %q", r.Database, r.Params["database"])
		}
		for k := range r.Params {
			if strings.HasPrefix(strings.ToLower(k), "pgbranch.") {
				t.Fatalf("Params keeps key %q", k)
			}
		}
		if o, ok := r.Params["options"]; ok && (o == "" || strings.Contains(strings.ToLower(o), "pgbranch.")) {
			t.Fatalf("Params[options] = %q", o)
		}

		// The forwarded parameters, addressed to the same branch, route the same way and
		// are forwarded unchanged.
		again := maps.Clone(r.Params)
		again["database"] = r.Database + "@" + r.Branch
		r2, err := router.Parse(again, "")
		if err != nil {
			t.Fatalf("re-Parse(%v): %v", again, err)
		}
		if r2.Database != r.Database || r2.Branch != r.Branch {
			t.Fatalf("re-Parse = (%q, %q), want (%q, %q)", r2.Database, r2.Branch, r.Database, r.Branch)
		}
		if r2.Options != (router.Options{}) {
			t.Fatalf("re-Parse found options %+v", r2.Options)
		}
		if !maps.Equal(r2.Params, r.Params) {
			t.Fatalf("re-Parse Params = %v, want %v", r2.Params, r.Params)
		}
	})
}
