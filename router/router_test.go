package router_test

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/router"
)

func TestParseDatabase(t *testing.T) {
	t.Parallel()
	long63 := strings.Repeat("a", 63)
	tests := []struct {
		name          string
		params        map[string]string
		defaultBranch string // "" means "main", "-" means no default branch
		wantDB        string
		wantBranch    string
		wantErr       error
	}{
		{name: "db at branch", params: db("app@feature-x"), wantDB: "app", wantBranch: "feature-x"},
		{name: "last at wins", params: db("app@b@c"), wantDB: "app@b", wantBranch: "c"},
		{name: "percent-encoded at", params: db("app%40feature-x"), wantDB: "app", wantBranch: "feature-x"},
		{name: "last percent-encoded at", params: db("a%40b%40c"), wantDB: "a%40b", wantBranch: "c"},
		{name: "real at beats percent", params: db("a%40b@c"), wantDB: "a%40b", wantBranch: "c"},
		{name: "default branch", params: db("app"), wantDB: "app", wantBranch: "main"},
		{name: "no default branch", params: db("app"), defaultBranch: "-", wantErr: router.ErrNoBranch},
		{name: "user as database", params: map[string]string{"user": "alice@dev"}, wantDB: "alice", wantBranch: "dev"},
		{name: "empty database falls back to user", params: map[string]string{"database": "", "user": "alice"}, wantDB: "alice", wantBranch: "main"},
		{name: "no database or user", params: map[string]string{}, wantErr: router.ErrNoDatabase},
		{name: "empty database before at", params: db("@x"), wantErr: router.ErrNoDatabase},
		{name: "empty database before percent", params: db("%40x"), wantErr: router.ErrNoDatabase},
		{name: "empty branch", params: db("app@"), wantErr: router.ErrInvalidName},
		{name: "dot dot", params: db("app@../x"), wantErr: router.ErrInvalidName},
		{name: "dot dot alone", params: db("app@.."), wantErr: router.ErrInvalidName},
		{name: "uppercase", params: db("app@Feature"), wantErr: router.ErrInvalidName},
		{name: "slash", params: db("app@a/b"), wantErr: router.ErrInvalidName},
		{name: "leading dash", params: db("app@-x"), wantErr: router.ErrInvalidName},
		{name: "64 chars", params: db("app@" + long63 + "a"), wantErr: router.ErrInvalidName},
		{name: "63 chars", params: db("app@" + long63), wantDB: "app", wantBranch: long63},
		{name: "nul in branch", params: db("app@a\x00b"), wantErr: router.ErrInvalidName},
		{name: "nul in database", params: db("a\x00p@b"), wantErr: router.ErrInvalidName},
		{name: "space in branch", params: db("app@x y"), wantErr: router.ErrInvalidName},
		{name: "underscore in branch", params: db("app@x_y"), wantErr: router.ErrInvalidName},
		{name: "non-ascii branch", params: db("app@café"), wantErr: router.ErrInvalidName},
		{name: "digits and dashes", params: db("app@0-a--b-"), wantDB: "app", wantBranch: "0-a--b-"},
		{name: "invalid default branch", params: db("app"), defaultBranch: "Main", wantErr: router.ErrInvalidName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			def := tt.defaultBranch
			switch def {
			case "":
				def = "main"
			case "-":
				def = ""
			}
			r, err := router.Parse(tt.params, def)
			if tt.wantErr != nil {
				checkErr(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if r.Database != tt.wantDB || r.Branch != tt.wantBranch {
				t.Errorf("Parse = (%q, %q), want (%q, %q)", r.Database, r.Branch, tt.wantDB, tt.wantBranch)
			}
			if got := r.Params["database"]; got != tt.wantDB {
				t.Errorf("Params[database] = %q, want %q", got, tt.wantDB)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		params      map[string]string
		want        router.Options
		wantOptions string // "" with wantNoKey means the key is gone
		wantNoKey   bool
		wantErr     error
	}{
		{
			name:        "ttl stripped, work_mem kept",
			params:      opts(`-c pgbranch.ttl=1h -c work_mem=4MB`),
			want:        router.Options{TTL: time.Hour},
			wantOptions: `-c work_mem=4MB`,
		},
		{
			name:        "escaped space kept",
			params:      opts(`-c application_name=a\ b -c pgbranch.ttl=90`),
			want:        router.Options{TTL: 90 * time.Second},
			wantOptions: `-c application_name=a\ b`,
		},
		{
			name:        "escaped backslash kept",
			params:      opts(`-c pgbranch.reset=on -c application_name=a\\b`),
			want:        router.Options{Reset: true},
			wantOptions: `-c application_name=a\\b`,
		},
		{
			name:      "long form",
			params:    opts(`--pgbranch.ephemeral=on`),
			want:      router.Options{Ephemeral: true},
			wantNoKey: true,
		},
		{
			name:      "joined form",
			params:    opts(`-cpgbranch.reset=true`),
			want:      router.Options{Reset: true},
			wantNoKey: true,
		},
		{
			name:        "all options, other switches kept in order",
			params:      opts(` -B 100  -c pgbranch.source=prod -e --pgbranch.from=main -c geqo=off -cpgbranch.ttl=7d -c pgbranch.ephemeral=YES -c pgbranch.reset=0 `),
			want:        router.Options{Source: "prod", From: "main", TTL: 7 * 24 * time.Hour, Ephemeral: true},
			wantOptions: `-B 100 -e -c geqo=off`,
		},
		{
			name:        "clustered switch before -c",
			params:      opts(`-ec pgbranch.ttl=2h -c x.y=1`),
			want:        router.Options{TTL: 2 * time.Hour},
			wantOptions: `-e -c x.y=1`,
		},
		{
			name:        "untouched options are forwarded verbatim",
			params:      opts(`-c  work_mem=4MB   -c search_path=a\,b`),
			wantOptions: `-c  work_mem=4MB   -c search_path=a\,b`,
		},
		{
			name:        "switch missing its argument is passed on",
			params:      opts(`-c pgbranch.ttl=1h -B`),
			want:        router.Options{TTL: time.Hour},
			wantOptions: `-B`,
		},
		{
			name:      "only whitespace left",
			params:    opts(`  -c pgbranch.ttl=0  `),
			wantNoKey: true,
		},
		{
			name:   "names are case-insensitive",
			params: opts(`-c PGBranch.TTL=10m --PGBRANCH.Source=Prod`),
			want:   router.Options{TTL: 10 * time.Minute, Source: "Prod"}, wantNoKey: true,
		},
		{
			name:   "last one wins",
			params: opts(`-c pgbranch.ttl=1h -c pgbranch.ttl=2h -c pgbranch.ephemeral=on -c pgbranch.ephemeral=off`),
			want:   router.Options{TTL: 2 * time.Hour}, wantNoKey: true,
		},
		{
			name:   "startup parameter",
			params: map[string]string{"database": "app@x", "pgbranch.source": "prod", "PGBRANCH.RESET": "t"},
			want:   router.Options{Source: "prod", Reset: true},
		},
		{
			name:        "startup parameter beats options",
			params:      map[string]string{"database": "app@x", "options": "-c pgbranch.source=a -c x=1", "pgbranch.source": "b"},
			want:        router.Options{Source: "b"},
			wantOptions: "-c x=1",
		},
		{name: "bad bool", params: opts(`-c pgbranch.ephemeral=maybe`), wantErr: router.ErrInvalidOption},
		{name: "ambiguous bool", params: opts(`-c pgbranch.reset=o`), wantErr: router.ErrInvalidOption},
		{name: "empty bool", params: opts(`-c pgbranch.reset=`), wantErr: router.ErrInvalidOption},
		{name: "bad ttl", params: opts(`-c pgbranch.ttl=soon`), wantErr: router.ErrInvalidOption},
		{name: "negative ttl", params: opts(`-c pgbranch.ttl=-1h`), wantErr: router.ErrInvalidOption},
		{name: "negative ttl seconds", params: opts(`-c pgbranch.ttl=-5`), wantErr: router.ErrInvalidOption},
		{name: "overflowing ttl days", params: opts(`-c pgbranch.ttl=9999999999d`), wantErr: router.ErrInvalidOption},
		{name: "bad from", params: opts(`-c pgbranch.from=../etc`), wantErr: router.ErrInvalidOption},
		{name: "empty source", params: opts(`-c pgbranch.source=`), wantErr: router.ErrInvalidOption},
		{name: "unknown option", params: opts(`-c pgbranch.tll=1h`), wantErr: router.ErrInvalidOption},
		{name: "unknown startup parameter", params: map[string]string{"database": "app@x", "pgbranch.nope": "1"}, wantErr: router.ErrInvalidOption},
		{name: "option without value", params: opts(`-c pgbranch.reset`), wantErr: router.ErrInvalidOption},
		{name: "bad value even if overridden", params: opts(`-c pgbranch.ttl=x -c pgbranch.ttl=1h`), wantErr: router.ErrInvalidOption},
		{name: "smuggled after --", params: opts(`-- -c pgbranch.ttl=1h`), wantErr: router.ErrInvalidOption},
		{name: "smuggled as switch argument", params: opts(`-B -c pgbranch.ttl=1h`), wantErr: router.ErrInvalidOption},
		{name: "mentioned in a value", params: opts(`-c application_name=pgbranch.x`), wantErr: router.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := router.Parse(tt.params, "main")
			if tt.wantErr != nil {
				checkErr(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if r.Options != tt.want {
				t.Errorf("Options = %+v, want %+v", r.Options, tt.want)
			}
			got, ok := r.Params["options"]
			switch {
			case tt.wantNoKey && ok:
				t.Errorf("Params[options] = %q, want no key", got)
			case !tt.wantNoKey && tt.wantOptions != "" && got != tt.wantOptions:
				t.Errorf("Params[options] = %q, want %q", got, tt.wantOptions)
			}
			for k := range r.Params {
				if strings.HasPrefix(strings.ToLower(k), "pgbranch.") {
					t.Errorf("Params has key %q", k)
				}
			}
		})
	}
}

func TestParseTTLAndBoolSpellings(t *testing.T) {
	t.Parallel()
	ttls := map[string]time.Duration{
		"0": 0, "3600": time.Hour, "1h30m": 90 * time.Minute, "2d": 48 * time.Hour, "500ms": 500 * time.Millisecond,
	}
	for v, want := range ttls {
		r, err := router.Parse(map[string]string{"database": "a@b", router.OptTTL: v}, "")
		if err != nil || r.Options.TTL != want {
			t.Errorf("ttl %q: got %v, %v; want %v", v, r.Options.TTL, err, want)
		}
	}
	bools := map[string]bool{
		"on": true, "ON": true, "true": true, "t": true, "Yes": true, "y": true, "1": true,
		"off": false, "of": false, "false": false, "F": false, "no": false, "n": false, "0": false,
	}
	for v, want := range bools {
		r, err := router.Parse(map[string]string{"database": "a@b", router.OptEphemeral: v}, "")
		if err != nil || r.Options.Ephemeral != want {
			t.Errorf("bool %q: got %v, %v; want %v", v, r.Options.Ephemeral, err, want)
		}
	}
	for _, v := range []string{"", "o", "2", "truee", "yess", "onn", "10", " on"} {
		if _, err := router.Parse(map[string]string{"database": "a@b", router.OptReset: v}, ""); !errors.Is(err, router.ErrInvalidOption) {
			t.Errorf("bool %q: err = %v, want ErrInvalidOption", v, err)
		}
	}
}

func TestParseParams(t *testing.T) {
	t.Parallel()
	in := map[string]string{
		"database":         "app@feature-x",
		"user":             "alice",
		"application_name": "psql",
		"options":          `-c pgbranch.ttl=1h -c work_mem=4MB`,
		"pgbranch.reset":   "on",
	}
	before := maps.Clone(in)
	r, err := router.Parse(in, "main")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !maps.Equal(in, before) {
		t.Errorf("Parse modified its input: %v", in)
	}
	want := map[string]string{
		"database":         "app",
		"user":             "alice",
		"application_name": "psql",
		"options":          `-c work_mem=4MB`,
	}
	if !maps.Equal(r.Params, want) {
		t.Errorf("Params = %v, want %v", r.Params, want)
	}
	r.Params["x"] = "y"
	if _, ok := in["x"]; ok {
		t.Error("Params shares the input map")
	}
}

func TestErrorMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		params      map[string]string
		wantMessage string
		wantHint    string
	}{
		{db("app@Foo"), `invalid branch name "Foo"`,
			"branch names are 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit"},
		{db("app@a\x00\n"), `invalid branch name "a\x00\n"`, ""},
		{opts(`-c pgbranch.bogus=1`), `unrecognized option "pgbranch.bogus"`,
			"known options: pgbranch.ephemeral, pgbranch.from, pgbranch.quota, pgbranch.reset, pgbranch.source, pgbranch.ttl"},
		{opts(`-c pgbranch.ttl=soon`), `invalid value for option "pgbranch.ttl": "soon"`, ""},
		{db("@x"), `empty database name in "@x"`, ""},
		{map[string]string{}, `no database name given`, ""},
	}
	for _, tt := range tests {
		_, err := router.Parse(tt.params, "main")
		var re *router.Error
		if !errors.As(err, &re) {
			t.Errorf("Parse(%v): error %v is not *router.Error", tt.params, err)
			continue
		}
		if re.Message != tt.wantMessage || err.Error() != tt.wantMessage {
			t.Errorf("Parse(%v): message %q, want %q", tt.params, re.Message, tt.wantMessage)
		}
		if tt.wantHint != "" && re.Hint != tt.wantHint {
			t.Errorf("Parse(%v): hint %q, want %q", tt.params, re.Hint, tt.wantHint)
		}
	}

	// Long input is truncated in the message.
	huge := strings.Repeat("X", 100<<10)
	for _, p := range []map[string]string{db("app@" + huge), opts("-c pgbranch.ttl=" + huge), opts("-c pgbranch." + huge + "=1")} {
		_, err := router.Parse(p, "main")
		if err == nil {
			t.Fatal("Parse accepted a huge value")
		}
		if n := len(err.Error()); n > 200 {
			t.Errorf("message is %d bytes long", n)
		}
	}
}

func TestValidBranchName(t *testing.T) {
	t.Parallel()
	good := []string{"a", "0", "main", "feature-x", "a-", strings.Repeat("z", 63)}
	bad := []string{"", "-a", "A", "a_b", "a.b", "..", ".", "a/b", "/", "a\x00", strings.Repeat("z", 64), "é", "a b"}
	for _, n := range good {
		if !router.ValidBranchName(n) {
			t.Errorf("ValidBranchName(%q) = false", n)
		}
	}
	for _, n := range bad {
		if router.ValidBranchName(n) {
			t.Errorf("ValidBranchName(%q) = true", n)
		}
	}
}

// db returns startup parameters with the given database.
func db(name string) map[string]string {
	return map[string]string{"database": name, "user": "alice"}
}

// opts returns startup parameters for app@x with the given options.
func opts(options string) map[string]string {
	return map[string]string{"database": "app@x", "user": "alice", "options": options}
}

// checkErr fails t unless err is a *router.Error wrapping want with a message.
func checkErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
	var re *router.Error
	if !errors.As(err, &re) {
		t.Fatalf("err %T is not *router.Error", err)
	}
	if re.Message == "" {
		t.Error("empty Message")
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1024", 1024, true}, {"500MB", 500 << 20, true}, {"2GB", 2 << 30, true}, {"1.5GiB", 3 << 29, true},
		{"10kB", 10 << 10, true}, {"1 TB", 1 << 40, true}, {"", 0, false}, {"-1", 0, false}, {"5 parsecs", 0, false},
		{"MB", 0, false}, {"99999999999TB", 0, false},
	} {
		got, ok := router.ParseSize(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestQuotaOption(t *testing.T) {
	t.Parallel()
	r, err := router.Parse(map[string]string{"user": "u", "database": "app@x", "options": "-c pgbranch.quota=1GB"}, "main")
	if err != nil || r.Options.Quota != 1<<30 {
		t.Fatalf("quota: %+v %v", r.Options, err)
	}
	if _, err := router.Parse(map[string]string{"user": "u", "database": "app@x", "options": "-c pgbranch.quota=lots"}, "main"); !errors.Is(err, router.ErrInvalidOption) {
		t.Fatalf("bad quota: %v", err)
	}
}

// Options.Params round-trips: a route's options, passed on as startup
// parameters, parse back to the same options.
func TestOptionsParamsRoundTrip(t *testing.T) {
	in := map[string]string{"user": "u", "database": "app@x",
		"options": "-c pgbranch.ttl=90m -c pgbranch.quota=2GB -c pgbranch.ephemeral=on -c pgbranch.reset=true -c pgbranch.from=main -c pgbranch.source=s"}
	r, err := router.Parse(in, "")
	if err != nil {
		t.Fatal(err)
	}
	out := r.Options.Params()
	out["user"], out["database"] = "u", "app@x"
	back, err := router.Parse(out, "")
	if err != nil {
		t.Fatal(err)
	}
	if back.Options != r.Options {
		t.Fatalf("options %+v came back as %+v (params %v)", r.Options, back.Options, out)
	}
	if len((router.Options{}).Params()) != 0 {
		t.Fatal("no options gave parameters")
	}
}

func TestOptionSetting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		options string
		value   string
		found   bool
	}{
		{"", "", false},
		{"-c application_name=app", "app", true},
		{"-capplication_name=app", "app", true},
		{"--application-name=app", "app", true},
		{"-c Application_Name=app", "app", true},
		{`-c application_name=my\ app`, "my app", true},
		{"-c application_name=one -c application_name=two", "two", true},
		{"-c application_name=", "", true},
		{"-c work_mem=1MB", "", false},
		{"-c application_name_x=app", "", false},
		{"-c application_name", "", false},
		{"-e -c application_name=app", "app", true},
		{"-ec application_name=app", "app", true},
		{"-B 16 -c application_name=app", "app", true},
		{"-B -c application_name=app", "", false}, // -B takes "-c" as its argument
		{"-- -c application_name=app", "", false},
		{"-c", "", false},
	}
	for _, c := range cases {
		v, ok := router.OptionSetting(c.options, "application_name")
		if v != c.value || ok != c.found {
			t.Errorf("OptionSetting(%q) = %q, %v; want %q, %v", c.options, v, ok, c.value, c.found)
		}
	}
}
