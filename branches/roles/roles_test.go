package roles_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/pgbranchproxy/pgbranchproxy/branches/roles"
)

const verifier = "SCRAM-SHA-256$4096:c2FsdHNhbHRzYWx0$c3RvcmVka2V5:c2VydmVya2V5"

func TestCanAuthenticate(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	at := func(d time.Duration) *time.Time { u := now.Add(d); return &u }
	tests := []struct {
		name string
		r    roles.Role
		want bool
	}{
		{"ok", roles.Role{Name: "app", Password: verifier, CanLogin: true}, true},
		{"md5 verifier", roles.Role{Name: "old", Password: "md5" + strings.Repeat("0", 32), CanLogin: true}, true},
		{"no LOGIN", roles.Role{Name: "group", Password: verifier}, false},
		{"no password", roles.Role{Name: "peer", CanLogin: true}, false},
		{"neither", roles.Role{Name: "nobody"}, false},
		{"expired", roles.Role{Name: "app", Password: verifier, CanLogin: true, ValidUntil: at(-time.Hour)}, false},
		{"expires at this instant (Postgres still accepts)", roles.Role{Name: "app", Password: verifier, CanLogin: true, ValidUntil: at(0)}, true},
		{"future expiry", roles.Role{Name: "app", Password: verifier, CanLogin: true, ValidUntil: at(time.Nanosecond)}, true},
		{"far future expiry", roles.Role{Name: "app", Password: verifier, CanLogin: true, ValidUntil: at(100 * 365 * 24 * time.Hour)}, true},
		{"future expiry without LOGIN", roles.Role{Name: "app", Password: verifier, ValidUntil: at(time.Hour)}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.r.CanAuthenticate(now); got != tc.want {
				t.Errorf("%+v.CanAuthenticate = %v, want %v", tc.r, got, tc.want)
			}
		})
	}
}

func roleEqual(a, b roles.Role) bool {
	if a.Name != b.Name || a.Password != b.Password || a.CanLogin != b.CanLogin || (a.ValidUntil == nil) != (b.ValidUntil == nil) ||
		(a.Superuser == nil) != (b.Superuser == nil) || a.Superuser != nil && *a.Superuser != *b.Superuser {
		return false
	}
	return a.ValidUntil == nil || a.ValidUntil.Equal(*b.ValidUntil)
}

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	until := time.Date(2027, 1, 2, 3, 4, 5, 123456000, time.UTC)
	tests := []struct {
		name string
		set  roles.Set
	}{
		{"empty", roles.Set{}},
		{"one", roles.Set{"app": {Name: "app", Password: verifier, CanLogin: true}}},
		{"several", roles.Set{
			"app":      {Name: "app", Password: verifier, CanLogin: true, ValidUntil: &until},
			"group":    {Name: "group", Superuser: new(false)},
			"postgres": {Name: "postgres", CanLogin: true, Superuser: new(true)},
			`we"ird ü`: {Name: `we"ird ü`, Password: "md5abc", CanLogin: true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			text := tc.set.Encode()
			if text == "" {
				t.Fatal("Encode of a non-nil set is empty, which Decode reads as unknown")
			}
			if !json.Valid([]byte(text)) {
				t.Errorf("Encode = %q, not JSON", text)
			}
			got, err := roles.Decode(text)
			if err != nil {
				t.Fatalf("Decode(%q): %v", text, err)
			}
			if got == nil || !maps.EqualFunc(got, tc.set, roleEqual) {
				t.Errorf("Decode(Encode(s)) = %+v, want %+v", got, tc.set)
			}
			if again := got.Encode(); again != text {
				t.Errorf("Encode is not stable: %q then %q", text, again)
			}
		})
	}
}

func TestMaySuperuse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    roles.Role
		want bool
	}{
		{"superuser", roles.Role{Name: "postgres", Superuser: new(true)}, true},
		{"not a superuser", roles.Role{Name: "app", Superuser: new(false)}, false},
		{"recorded before superusers were", roles.Role{Name: "app"}, true},
	} {
		if got := tc.r.MaySuperuse(); got != tc.want {
			t.Errorf("%s: MaySuperuse = %v, want %v", tc.name, got, tc.want)
		}
	}
	old, err := roles.Decode(`{"app":{"name":"app","can_login":true}}`)
	if err != nil || old["app"].Superuser != nil {
		t.Errorf("a set recorded before superusers: %+v, %v; want Superuser nil", old["app"], err)
	}
}

func TestEncodeNil(t *testing.T) {
	t.Parallel()
	var s roles.Set
	if got := s.Encode(); got != "" {
		t.Errorf("nil Set encodes as %q, want \"\"", got)
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		wantNil bool
		wantLen int
		wantErr bool
	}{
		{"empty string is unknown", "", true, 0, false},
		{"empty object", "{}", false, 0, false},
		{"JSON null", "null", true, 0, false},
		{"garbage", "not json at all", false, 0, true},
		{"truncated", `{"app":{"name":"app"`, false, 0, true},
		{"wrong shape", `["app"]`, false, 0, true},
		{"wrong field type", `{"app":{"name":"app","can_login":"yes"}}`, false, 0, true},
		{"bad time", `{"app":{"name":"app","valid_until":"tomorrow"}}`, false, 0, true},
		{"unknown fields ignored", `{"app":{"name":"app","can_login":true,"extra":1}}`, false, 1, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := roles.Decode(tc.text)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Decode(%q) error = %v, want error %v", tc.text, err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if (got == nil) != tc.wantNil || len(got) != tc.wantLen {
				t.Errorf("Decode(%q) = %#v, want nil %v and %d roles", tc.text, got, tc.wantNil, tc.wantLen)
			}
		})
	}
}
